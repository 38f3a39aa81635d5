//! A recorded request's answer as the bytes of a note (`crate::store::Note`): what the writer stores under
//! `meta/req/<request id>` in the commit that holds the request's changes, and reads back when the same
//! request is retried after the writer that ran it died.
//!
//! Layout: the status (2 bytes, little-endian), the number of headers (2 bytes), each header as its name
//! and its value (each 4 bytes of length, then the UTF-8 text), then the body to the end.
//!
//! An answer holding payloads opened from `encryptionEnabled` queues is stored sealed ([`seal`]): its body
//! is replaced by the envelope of the body's text under the broker's key (the payloads' cipher, AES-256-GCM
//! on Web Crypto) and a [`SEALED`] header marks it; [`open`] makes the answer again for the retry. Nothing of
//! such an answer is stored in plain text.

use super::cipher::JsCipher;
use crate::http::HttpResponse;

/// The header that marks a recorded answer whose body is sealed (stored only, never answered).
const SEALED: &str = "x-queen-sealed-answer";

/// `response` with its body sealed under `key`, to be stored; `None` when the body is not text or the
/// cipher refused.
pub async fn seal(response: &HttpResponse, cipher: &JsCipher) -> Option<HttpResponse> {
    let text = std::str::from_utf8(&response.body).ok()?;
    let envelope = cipher.seal_text(text).await?;
    let mut headers = response.headers.clone();
    headers.push((SEALED.to_string(), String::new()));
    Some(HttpResponse {
        status: response.status,
        headers,
        body: envelope.into_bytes(),
    })
}

/// The answer a stored one stands for: as it is, or opened when it is sealed; `None` when it is sealed
/// and does not open (no key now, or another one).
pub async fn open(mut stored: HttpResponse, cipher: Option<&JsCipher>) -> Option<HttpResponse> {
    let Some(at) = stored.headers.iter().position(|(name, _)| name == SEALED) else {
        return Some(stored);
    };
    stored.headers.remove(at);
    let envelope = std::str::from_utf8(&stored.body).ok()?;
    stored.body = cipher?.open_text(envelope).await?.into_bytes();
    Some(stored)
}

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
