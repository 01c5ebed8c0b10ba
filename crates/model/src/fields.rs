//! Typed reading of untrusted JSON objects, with errors that name the field.
//!
//! Request bodies are parsed into a `serde_json::Value` first and read field by field, so
//! every wrong type or length becomes a 400 whose message says which field and which bound.

use serde_json::{Map, Value};

/// A validation failure; the message names the field and the bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub fn invalid(msg: impl Into<String>) -> Invalid {
    Invalid(msg.into())
}

/// A JSON object whose fields are read one at a time.
pub struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// Fails unless the body is a JSON object.
    pub fn of(body: &'a Value) -> Result<Fields<'a>, Invalid> {
        body.as_object()
            .map(Fields)
            .ok_or_else(|| invalid("request body must be a JSON object"))
    }

    /// The raw value; JSON `null` counts as absent.
    pub fn raw(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// An optional string, trimmed; blank counts as absent. `max` is in characters.
    pub fn opt_str(&self, name: &str, max: usize) -> Result<Option<String>, Invalid> {
        match self.raw(name) {
            None => Ok(None),
            Some(Value::String(s)) => {
                let t = s.trim();
                if t.is_empty() {
                    Ok(None)
                } else if t.chars().count() > max {
                    Err(invalid(format!("{name} must be at most {max} characters")))
                } else {
                    Ok(Some(t.to_string()))
                }
            }
            Some(_) => Err(invalid(format!("{name} must be a string"))),
        }
    }

    /// An optional string taken verbatim (not trimmed), `min..=max` characters when present.
    pub fn opt_exact_str(
        &self,
        name: &str,
        min: usize,
        max: usize,
    ) -> Result<Option<String>, Invalid> {
        match self.raw(name) {
            None => Ok(None),
            Some(Value::String(s)) => {
                let n = s.chars().count();
                if n < min || n > max {
                    Err(invalid(format!("{name} must be {min}-{max} characters")))
                } else {
                    Ok(Some(s.clone()))
                }
            }
            Some(_) => Err(invalid(format!("{name} must be a string"))),
        }
    }

    /// An optional whole number within `min..=max`.
    pub fn opt_int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, Invalid> {
        match self.raw(name) {
            None => Ok(None),
            Some(v) => {
                let n = whole_number(v)
                    .ok_or_else(|| invalid(format!("{name} must be a whole number")))?;
                if n < min || n > max {
                    Err(invalid(format!("{name} must be between {min} and {max}")))
                } else {
                    Ok(Some(n))
                }
            }
        }
    }

    /// An optional whole number, clamped into `min..=max` (huge values clamp too).
    pub fn opt_clamped_int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, Invalid> {
        match self.raw(name) {
            None => Ok(None),
            Some(v) => {
                if let Some(n) = whole_number(v) {
                    return Ok(Some(n.clamp(min, max)));
                }
                match v.as_f64() {
                    Some(f) if f.is_finite() && f.fract() == 0.0 => {
                        Ok(Some(if f < 0.0 { min } else { max }))
                    }
                    _ => Err(invalid(format!("{name} must be a whole number"))),
                }
            }
        }
    }

    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, Invalid> {
        match self.raw(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(invalid(format!("{name} must be true or false"))),
        }
    }
}

fn whole_number(v: &Value) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    if v.as_u64().is_some() {
        return Some(i64::MAX);
    }
    None
}

/// `^[A-Za-z0-9_-]{1,64}$`: choice ids and sources.
pub fn is_token_id(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The project a working folder names: its last segment, within the `project` field's
/// 200 characters. Every host adapter names projects this way.
pub fn project_of(cwd: &str) -> Option<String> {
    let last = cwd
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()?;
    (!last.is_empty()).then(|| truncate(last, 200))
}

/// Cuts to at most `max` characters, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}
