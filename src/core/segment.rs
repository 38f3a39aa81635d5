//! Segments: the immutable, compressed blocks that hold message payloads.
//!
//! One segment per push batch per partition. Format version 1:
//!
//! ```text
//! byte 0      format version (1)
//! bytes 1..   raw DEFLATE (miniz_oxide, level 6) of a JSON array of StoredMessage
//! ```
//!
//! Readers refuse versions they do not know, so a future format can be added beside this one. A pop
//! decodes only the segments that cover the offsets it reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The segment format this build writes.
pub const SEGMENT_FORMAT_V1: u8 = 1;

/// One message as stored in a segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// 0-based offset in its partition.
    #[serde(rename = "o")]
    pub offset: u64,
    /// Message id (UUIDv7).
    #[serde(rename = "i")]
    pub id: String,
    /// Transaction id (dedup key).
    #[serde(rename = "t")]
    pub transaction_id: String,
    /// Optional trace id.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Optional authenticated producer.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub producer_sub: Option<String>,
    /// Push time, Unix ms.
    #[serde(rename = "c")]
    pub created_at_ms: i64,
    /// The payload.
    #[serde(rename = "p")]
    pub payload: Value,
}

/// Encodes a batch of messages (offsets ascending, contiguous) into a segment.
pub fn encode(messages: &[StoredMessage]) -> Vec<u8> {
    // Serializing plain data structs to JSON cannot fail.
    let json = serde_json::to_vec(messages).expect("stored messages serialize");
    let mut out = Vec::with_capacity(json.len() / 3 + 8);
    out.push(SEGMENT_FORMAT_V1);
    out.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(&json, 6));
    out
}

/// Decodes a segment. Fails on an unknown version or corrupt bytes.
pub fn decode(bytes: &[u8]) -> Result<Vec<StoredMessage>, String> {
    match bytes.first() {
        Some(&SEGMENT_FORMAT_V1) => {
            let json = miniz_oxide::inflate::decompress_to_vec(&bytes[1..])
                .map_err(|e| format!("segment does not inflate: {e:?}"))?;
            serde_json::from_slice(&json).map_err(|e| format!("segment JSON is corrupt: {e}"))
        }
        Some(v) => Err(format!(
            "segment format version {v} is newer than this build understands (1)"
        )),
        None => Err("empty segment".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(offset: u64, payload: Value) -> StoredMessage {
        StoredMessage {
            offset,
            id: format!("id-{offset}"),
            transaction_id: format!("tx-{offset}"),
            trace_id: None,
            producer_sub: None,
            created_at_ms: 1000 + offset as i64,
            payload,
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn round_trips_any_json_including_null() {
        let batch = vec![
            msg(0, Value::Null),
            msg(1, json!({})),
            msg(2, json!({"a": [1, 2.5, "x"]})),
        ];
        assert_eq!(decode(&encode(&batch)).unwrap(), batch);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn refuses_unknown_version() {
        let mut bytes = encode(&[msg(0, json!(1))]);
        bytes[0] = 9;
        assert!(decode(&bytes).unwrap_err().contains("newer"));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn compresses_realistic_payloads() {
        let batch: Vec<_> = (0..100)
            .map(|i| msg(i, json!({"orderId": i, "customer": "c-1042", "items": [{"sku": "A-1", "qty": 2}], "status": "created"})))
            .collect();
        let raw = serde_json::to_vec(&batch).unwrap().len();
        assert!(
            encode(&batch).len() * 3 < raw,
            "deflate should shrink repetitive JSON at least 3x"
        );
    }
}
