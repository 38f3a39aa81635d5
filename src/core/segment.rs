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
    deflate_into(&json, &mut out);
    out
}

const DEFLATE_LEVEL: u8 = 6;

thread_local! {
    /// One compressor per thread, reset between segments: a fresh `CompressorOxide` allocates and
    /// clears a few hundred KiB of tables, which dominated small pushes.
    static COMPRESSOR: std::cell::RefCell<Option<Box<CompressorOxide>>> = const { std::cell::RefCell::new(None) };
}

use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};

/// Raw DEFLATE of `input`, appended to `out` (the same stream `miniz_oxide::deflate::compress_to_vec`
/// produces, with a reused compressor).
fn deflate_into(mut input: &[u8], out: &mut Vec<u8>) {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = slot.get_or_insert_with(|| {
            Box::new(CompressorOxide::new(create_comp_flags_from_zip_params(
                DEFLATE_LEVEL.into(),
                0,
                0,
            )))
        });
        compressor.reset();
        let start = out.len();
        out.resize(start + (input.len() / 2).max(64), 0);
        let mut pos = start;
        loop {
            let (status, bytes_in, bytes_out) =
                compress(compressor, input, &mut out[pos..], TDEFLFlush::Finish);
            pos += bytes_out;
            match status {
                TDEFLStatus::Done => break,
                TDEFLStatus::Okay => {
                    input = &input[bytes_in..];
                    if out.len() - pos < 64 {
                        let grow = out.len().max(64);
                        out.resize(out.len() + grow, 0);
                    }
                }
                // Compressing an in-memory buffer into a growing buffer cannot fail.
                other => unreachable!("deflate failed: {other:?}"),
            }
        }
        out.truncate(pos);
    });
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
    fn reused_compressor_matches_the_one_shot_stream() {
        let big: Vec<_> = (0..500)
            .map(|i| msg(i, json!({"i": i, "pad": "abc".repeat(i as usize % 40)})))
            .collect();
        for batch in [&big[..1], &big[..]] {
            let json = serde_json::to_vec(batch).unwrap();
            let mut ours = Vec::new();
            deflate_into(&json, &mut ours);
            assert_eq!(
                ours,
                miniz_oxide::deflate::compress_to_vec(&json, DEFLATE_LEVEL)
            );
            assert_eq!(decode(&encode(batch)).unwrap(), batch.to_vec());
        }
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
