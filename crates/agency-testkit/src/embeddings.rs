//! A deterministic OpenAI-compatible embeddings endpoint (`POST
//! /v1/embeddings`), so that Agency's semantic memory search
//! is tested offline. The vector of a text is a hashed bag of its
//! lowercase words: [`DIMS`] dimensions, each word adding 1 to the
//! dimension its FNV-1a hash picks, then L2-normalised. Texts sharing words
//! are similar, texts sharing none are (nearly, collisions aside)
//! orthogonal, and the same text always gets the same vector.

use axum::Json;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Dimensions of every vector.
pub const DIMS: usize = 64;

/// The vector of `text`.
pub fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIMS];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = w.to_lowercase();
        let i = (fnv1a(w.as_bytes()) % DIMS as u64) as usize;
        v[i] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `POST /v1/embeddings` with `{"model", "input": TEXT | [TEXT…]}`.
pub(crate) async fn embeddings(body: Bytes) -> Response {
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(&format!("failed to parse the request body as JSON: {e}")),
    };
    let inputs: Vec<String> = match &req["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => {
            let texts: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            match texts {
                Some(t) if !t.is_empty() => t,
                _ => {
                    return bad(
                        "failed to read `input`: give a string or a non-empty array of strings",
                    );
                }
            }
        }
        _ => return bad("failed to read `input`: give a string or a non-empty array of strings"),
    };
    let model = req["model"].as_str().unwrap_or("scripted-embeddings");
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count()).sum();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embed(t)}))
        .collect();
    Json(json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

fn bad(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": {"type": "invalid_request_error", "message": message}})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn vectors_are_deterministic_normalised_and_similar_for_shared_words() {
        let a = embed("The zebra crosses the river");
        assert_eq!(a, embed("the ZEBRA crosses, the river!"));
        assert_eq!(a.len(), DIMS);
        assert!((cos(&a, &a) - 1.0).abs() < 1e-5);
        let related = embed("zebra river");
        let unrelated = embed("quantum pancake");
        assert!(cos(&a, &related) > 0.5, "{}", cos(&a, &related));
        assert!(cos(&a, &related) > cos(&a, &unrelated));
        assert!(embed("").iter().all(|x| *x == 0.0));
    }
}
