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
    // And through a `Value`, as the broker reads bodies.
    let value: Value = serde_json::from_str(r#"{"a":true}"#).unwrap();
    assert_eq!(
        serde_json::from_value::<String>(value["a"].clone())
            .unwrap_err()
            .to_string(),
        "invalid type: boolean `true`, expected a string"
    );
}
