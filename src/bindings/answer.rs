//! A recorded request's answer as the bytes of a note (`crate::store::Note`): what the writer stores under
//! `meta/req/<request id>` in the commit that holds the request's changes, and reads back when the same
//! request is retried after the writer that ran it died.
//!
//! Layout: the status (2 bytes, little-endian), the number of headers (2 bytes), each header as its name
//! and its value (each 4 bytes of length, then the UTF-8 text), then the body to the end.

use crate::http::HttpResponse;

/// The bytes of `response`.
pub fn encode(response: &HttpResponse) -> Vec<u8> {
    let text_bytes: usize = response
        .headers
        .iter()
        .map(|(n, v)| 8 + n.len() + v.len())
        .sum();
    let mut out = Vec::with_capacity(4 + text_bytes + response.body.len());
    out.extend_from_slice(&response.status.to_le_bytes());
    out.extend_from_slice(&(response.headers.len() as u16).to_le_bytes());
    for (name, value) in &response.headers {
        for text in [name, value] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
    out.extend_from_slice(&response.body);
    out
}

/// The answer `bytes` hold, or `None` when they are not one [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Option<HttpResponse> {
    let mut rest = bytes;
    let status = u16::from_le_bytes(take(&mut rest, 2)?.try_into().ok()?);
    let count = u16::from_le_bytes(take(&mut rest, 2)?.try_into().ok()?);
    let mut headers = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let name = text(&mut rest)?;
        headers.push((name, text(&mut rest)?));
    }
    Some(HttpResponse {
        status,
        headers,
        body: rest.to_vec(),
    })
}

/// The first `n` bytes of `rest`, which moves past them.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
    *rest = tail;
    Some(head)
}

/// A length-prefixed UTF-8 text at the start of `rest`.
fn text(rest: &mut &[u8]) -> Option<String> {
    let len = u32::from_le_bytes(take(rest, 4)?.try_into().ok()?) as usize;
    String::from_utf8(take(rest, len)?.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[wasm_bindgen_test::wasm_bindgen_test]
    fn answers_round_trip_and_garbage_is_refused() {
        let answer = HttpResponse {
            status: 201,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: br#"[{"status":"queued"}]"#.to_vec(),
        };
        let bytes = encode(&answer);
        assert_eq!(decode(&bytes), Some(answer));
        let empty = HttpResponse {
            status: 204,
            headers: vec![],
            body: vec![],
        };
        assert_eq!(decode(&encode(&empty)), Some(empty));
        // Cut inside a header: not an answer.
        assert_eq!(decode(&bytes[..10]), None);
        assert_eq!(decode(&[1]), None);
    }
}
