//! The patched serde_json (vendor/README.md) writes its "invalid type" errors with serde's own texts, as the
//! release does: the patch moved where they are written, not what they say.

use serde_json::Value;

fn error<T: serde::de::DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
    serde_json::from_str::<T>(json).unwrap_err().to_string()
}

/// A reader of one type: the error text of reading some JSON as it.
type Reader = fn(&str) -> String;

#[test]
fn invalid_type_errors_read_as_the_release_writes_them() {
    let cases: [(&str, Reader, &str); 10] = [
        (
            "true",
            error::<String>,
            "invalid type: boolean `true`, expected a string at line 1 column 4",
        ),
        (
            "7",
            error::<String>,
            "invalid type: integer `7`, expected a string at line 1 column 1",
        ),
        (
            "-7",
            error::<String>,
            "invalid type: integer `-7`, expected a string at line 1 column 2",
        ),
        (
            "1.5",
            error::<String>,
            "invalid type: floating point `1.5`, expected a string at line 1 column 3",
        ),
        (
            "null",
            error::<String>,
            "invalid type: null, expected a string at line 1 column 4",
        ),
        (
            r#""a\"b""#,
            error::<u64>,
            r#"invalid type: string "a\"b", expected u64 at line 1 column 6"#,
        ),
        (
            "[1]",
            error::<String>,
            "invalid type: sequence, expected a string at line 1 column 0",
        ),
        (
            "{}",
            error::<String>,
            "invalid type: map, expected a string at line 1 column 0",
        ),
        (
            r#""ab""#,
            error::<char>,
            r#"invalid value: string "ab", expected a character at line 1 column 4"#,
        ),
        (
            r#""x""#,
            error::<Vec<u8>>,
            r#"invalid type: string "x", expected a sequence at line 1 column 3"#,
        ),
    ];
    for (json, read, expected) in cases {
        assert_eq!(read(json), expected, "reading {json}");
    }
    // A character (serde's own readers report one; serde_json's parser does not).
    let unexpected = |c| {
        <serde_json::Error as serde::de::Error>::invalid_type(
            serde::de::Unexpected::Char(c),
            &"a string",
        )
        .to_string()
    };
    assert_eq!(
        unexpected('x'),
        "invalid type: character `x`, expected a string"
    );
    assert_eq!(
        unexpected('é'),
        "invalid type: character `é`, expected a string"
    );
    // And through a `Value`, as the broker reads bodies.
    let value: Value = serde_json::from_str(r#"{"a":true}"#).unwrap();
    assert_eq!(
        serde_json::from_value::<String>(value["a"].clone())
            .unwrap_err()
            .to_string(),
        "invalid type: boolean `true`, expected a string"
    );
}

/// A string in an "invalid type" error is quoted as `{:?}` quotes it for every ASCII text, control characters
/// and quotes included (change 5 writes the quoting itself); other characters are written as they are.
#[test]
fn strings_in_errors_are_quoted_as_debug_quotes_ascii() {
    let unexpected = |s: &str| {
        <serde_json::Error as serde::de::Error>::invalid_type(
            serde::de::Unexpected::Str(s),
            &"a number",
        )
        .to_string()
    };
    let every_ascii: String = (0u8..128).map(char::from).collect();
    for text in [
        every_ascii.as_str(),
        "",
        "plain",
        "a\"b\\c\n",
        "\u{7f}x\u{1}",
    ] {
        assert_eq!(
            unexpected(text),
            format!("invalid type: string {text:?}, expected a number")
        );
    }
    assert_eq!(
        unexpected("é\u{200b}"),
        "invalid type: string \"é\u{200b}\", expected a number",
        "non-ASCII characters as they are"
    );
}

/// A custom message ending in " at line L column C" has its position taken from the last such suffix, as
/// the release's `rfind` takes it (change 4 searches byte by byte): the message keeps what comes before
/// it, and a suffix that is not the message's end, or whose numbers are not numbers or do not fit a `usize`,
/// stays in the text.
#[test]
fn custom_messages_give_up_their_last_position_suffix() {
    use serde::de::Error as _;
    let cases: [(&str, usize, usize, &str); 8] = [
        ("bad at line 3 column 14", 3, 14, "bad at line 3 column 14"),
        (
            "a at line 1 column 2 at line 30 column 4",
            30,
            4,
            "a at line 1 column 2 at line 30 column 4",
        ),
        (" at line 7 column 8", 7, 8, " at line 7 column 8"),
        (
            "x at line at line 5 column 6",
            5,
            6,
            "x at line at line 5 column 6",
        ),
        (
            "a at line 1 column 2 and more",
            0,
            0,
            "a at line 1 column 2 and more",
        ),
        ("a at line x column 2", 0, 0, "a at line x column 2"),
        (
            "a at line 1 column 99999999999999999999999",
            0,
            0,
            "a at line 1 column 99999999999999999999999",
        ),
        ("no position", 0, 0, "no position"),
    ];
    for (msg, line, column, text) in cases {
        let e = serde_json::Error::custom(msg);
        assert_eq!((e.line(), e.column()), (line, column), "{msg}");
        assert_eq!(e.to_string(), text, "{msg}");
    }
    // The suffix itself is cut from the message: `Display` writes it back from the numbers.
    let e = serde_json::Error::custom("a at line 1 column 2 at line 30 column 04");
    assert_eq!(e.to_string(), "a at line 1 column 2 at line 30 column 4");
}

/// The patched serde_json's `Map` (a sorted `Vec`, vendor/README.md) answers as the release's
/// `BTreeMap`-backed one: the same operations on both, and the same entries in the same order after each.
#[test]
fn the_map_answers_as_a_btree_map() {
    use serde_json::Map;
    use std::collections::BTreeMap;
    let mut map = Map::new();
    let mut model: BTreeMap<String, Value> = BTreeMap::new();
    let mut state = 7u32;
    for step in 0..4000u32 {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let key = format!("k{}", (state >> 16) % 97);
        let value = Value::from(step);
        match (state >> 8) % 6 {
            0 | 1 => assert_eq!(
                map.insert(key.clone(), value.clone()),
                model.insert(key, value)
            ),
            2 => assert_eq!(map.remove(&key), model.remove(&key)),
            3 => {
                let a = map.entry(key.clone()).or_insert(value.clone()).clone();
                let b = model.entry(key).or_insert(value).clone();
                assert_eq!(a, b);
            }
            4 => {
                let more: Vec<(String, Value)> = vec![
                    (key.clone(), value.clone()),
                    ("k5".into(), Value::Null),
                    (key, Value::Bool(true)),
                ];
                map.extend(more.clone());
                model.extend(more);
            }
            _ => {
                map.retain(|k, _| !k.ends_with('3'));
                model.retain(|k, _| !k.ends_with('3'));
            }
        }
        assert!(map.iter().eq(model.iter()), "step {step}");
        assert_eq!(map.get("k5"), model.get("k5"));
        assert_eq!(map.len(), model.len());
    }
}

/// A parsed object keeps, of repeated keys, the last value, and its keys in order, as the release does;
/// an object in the worst order for a sorted insert (descending keys) parses to the same map.
#[test]
fn parsed_objects_keep_the_last_of_repeated_keys_in_key_order() {
    let v: Value =
        serde_json::from_str(r#"{"b":1,"a":2,"c":{"z":0,"y":[1]},"b":3,"a":4}"#).unwrap();
    assert_eq!(v.to_string(), r#"{"a":4,"b":3,"c":{"y":[1],"z":0}}"#);
    let m: serde_json::Map<String, Value> = serde_json::from_str(r#"{"x":1,"w":2,"x":5}"#).unwrap();
    assert_eq!(Value::Object(m).to_string(), r#"{"w":2,"x":5}"#);
    let n = 20_000;
    let text = format!(
        "{{{}}}",
        (0..n)
            .rev()
            .map(|i| format!("\"{i:05}\":{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let map = v.as_object().unwrap();
    assert_eq!(map.len(), n);
    assert!(map
        .iter()
        .enumerate()
        .all(|(i, (k, v))| *k == format!("{i:05}") && *v == i));
    // Many keys, each sent several times, in a scrambled order: as a B-tree would hold them.
    let mut state = 11u32;
    let mut model = std::collections::BTreeMap::new();
    let mut parts = Vec::new();
    for i in 0..3000u32 {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let key = format!("k{}", (state >> 16) % 700);
        parts.push(format!("\"{key}\":{i}"));
        model.insert(key, Value::from(i));
    }
    let v: Value = serde_json::from_str(&format!("{{{}}}", parts.join(","))).unwrap();
    assert!(v.as_object().unwrap().iter().eq(model.iter()));
    let collected: serde_json::Map<String, Value> = [
        ("b".to_string(), Value::from(1)),
        ("a".into(), Value::from(2)),
        ("b".into(), Value::from(3)),
    ]
    .into_iter()
    .collect();
    assert_eq!(Value::Object(collected).to_string(), r#"{"a":2,"b":3}"#);
}
