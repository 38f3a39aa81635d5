//! The patched serde_json (vendor/README.md) writes its "invalid type" errors with serde's own texts, as the
//! release does: the patch moved where they are written, not what they say.

use serde_json::Value;

fn error<T: serde::de::DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
    serde_json::from_str::<T>(json).unwrap_err().to_string()
}

#[test]
fn invalid_type_errors_read_as_the_release_writes_them() {
    assert_eq!(
        error::<String>("true"),
        "invalid type: boolean `true`, expected a string at line 1 column 4"
    );
    assert_eq!(
        error::<String>("7"),
        "invalid type: integer `7`, expected a string at line 1 column 1"
    );
    assert_eq!(
        error::<String>("-7"),
        "invalid type: integer `-7`, expected a string at line 1 column 2"
    );
    assert_eq!(
        error::<String>("1.5"),
        "invalid type: floating point `1.5`, expected a string at line 1 column 3"
    );
    assert_eq!(
        error::<String>("null"),
        "invalid type: null, expected a string at line 1 column 4"
    );
    assert_eq!(
        error::<u64>("\"a\\\"b\""),
        "invalid type: string \"a\\\"b\", expected u64 at line 1 column 6"
    );
    assert_eq!(
        error::<String>("[1]"),
        "invalid type: sequence, expected a string at line 1 column 0"
    );
    assert_eq!(
        error::<String>("{}"),
        "invalid type: map, expected a string at line 1 column 0"
    );
    assert_eq!(
        error::<char>("\"ab\""),
        "invalid value: string \"ab\", expected a character at line 1 column 4"
    );
    assert_eq!(
        error::<Vec<u8>>("\"x\""),
        "invalid type: string \"x\", expected a sequence at line 1 column 3"
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
