//! A response cache for traj-run: identical requests are answered from disk, without a
//! network call and without spending.
//!
//! The key is the SHA-256 of the endpoint URL and the request body as sent (serde_json
//! keeps key order, so the same request always serialises the same way). Each entry is
//! the provider's whole response body, in `DIR/<2 hex>/<64 hex>.json`, written atomically
//! (temp file + rename), so concurrent workers and a `kill -9` never leave a torn entry.
//! Only successful responses are stored. A missing, unreadable or corrupt entry is a miss.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A directory of cached responses.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// Open (creating it if needed) a cache directory.
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create cache directory {}", dir.display()))?;
        Ok(Cache {
            dir: dir.to_path_buf(),
        })
    }

    /// The key of a request: hex SHA-256 of `url`, a newline, and the body's JSON, then,
    /// when given, a newline and `tag` (what else tells apart two requests that must
    /// not share an answer: independent rollouts of one request).
    pub fn key(url: &str, body: &Value, tag: Option<&str>) -> String {
        let mut h = Sha256::new();
        h.update(url.as_bytes());
        h.update(b"\n");
        h.update(serde_json::to_vec(body).unwrap_or_default());
        if let Some(tag) = tag {
            h.update(b"\n");
            h.update(tag.as_bytes());
        }
        hex(&h.finalize())
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The stored response for `key`, if any.
    pub fn get(&self, key: &str) -> Option<Value> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Store a response body under `key` (atomically).
    pub fn put(&self, key: &str, raw: &Value) -> Result<()> {
        let path = self.path(key);
        let parent = path.parent().expect("cache entries live in a subdirectory");
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(parent)
            .with_context(|| format!("cannot write in {}", parent.display()))?;
        tmp.write_all(&serde_json::to_vec(raw)?)?;
        tmp.persist(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roundtrip_and_key_depends_on_url_and_body() {
        let d = tempfile::tempdir().unwrap();
        let c = Cache::open(&d.path().join("c")).unwrap();
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let k = Cache::key("http://a/v1", &body, None);
        assert_eq!(k.len(), 64);
        assert_ne!(k, Cache::key("http://b/v1", &body, None));
        assert_ne!(k, Cache::key("http://a/v1", &json!({"model": "m2"}), None));
        // Two rollouts of one request are two keys.
        assert_ne!(k, Cache::key("http://a/v1", &body, Some("0:1")));
        assert_ne!(
            Cache::key("http://a/v1", &body, Some("0:1")),
            Cache::key("http://a/v1", &body, Some("1:0"))
        );
        assert_eq!(c.get(&k), None);
        c.put(&k, &json!({"choices": []})).unwrap();
        assert_eq!(c.get(&k), Some(json!({"choices": []})));
        std::fs::write(c.path(&k), b"{torn").unwrap();
        assert_eq!(c.get(&k), None);
    }
}
