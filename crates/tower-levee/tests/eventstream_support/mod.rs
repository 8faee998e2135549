//! Binary AWS event-stream frames (Bedrock's ConverseStream), built with
//! real CRCs, for the tests that stream them.

#![allow(dead_code, unreachable_pub)]

/// One binary event-stream message with string headers and real CRCs.
pub fn frame(headers: &[(&str, &str)], payload: &str) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(7);
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value.as_bytes());
    }
    let total = (12 + h.len() + payload.len() + 4) as u32;
    let mut f = total.to_be_bytes().to_vec();
    f.extend_from_slice(&(h.len() as u32).to_be_bytes());
    f.extend_from_slice(&crc32fast::hash(&f).to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload.as_bytes());
    f.extend_from_slice(&crc32fast::hash(&f).to_be_bytes());
    f
}

/// An event frame of `kind`.
pub fn event(kind: &str, payload: &str) -> Vec<u8> {
    frame(
        &[(":message-type", "event"), (":event-type", kind)],
        payload,
    )
}

/// A ConverseStream `modelStreamErrorException` frame.
pub fn stream_error() -> Vec<u8> {
    frame(
        &[
            (":message-type", "exception"),
            (":exception-type", "modelStreamErrorException"),
        ],
        r#"{"message":"An error occurred while streaming the response.","originalStatusCode":500}"#,
    )
}

/// The start of a ConverseStream: `messageStart`, no output yet.
pub fn start() -> Vec<u8> {
    event("messageStart", r#"{"role":"assistant"}"#)
}

/// A ConverseStream's output and its end.
pub fn output_and_end() -> Vec<u8> {
    let mut b = event("contentBlockDelta", r#"{"delta":{"text":"Hi"}}"#);
    b.extend(event("messageStop", r#"{"stopReason":"end_turn"}"#));
    b.extend(event("metadata", r#"{"usage":{"totalTokens":3}}"#));
    b
}
