//! Toolset distributions and the per-row draw of traj-sample-tools.
//!
//! A distribution maps toolset names to inclusion probabilities in percent. A draw
//! includes each available toolset (by default the catalog's drawable ones,
//! [`super::toolsets::drawable_toolsets`]) independently with its probability; when
//! nothing is drawn, the distribution's most probable available toolset (the first on
//! a tie) is used, so a draw is never empty while any of its toolsets is available.
//!
//! Draws are deterministic: toolset `t` of row `key` under run seed `seed` uses the
//! uniform number `u(seed, key, t)` from a splitmix64 mix of the three, so a row's
//! toolsets depend on nothing else (not on other rows, sharding, thread count, or the
//! other toolsets of the distribution). The 17 built-in distributions are those of
//! hermes-agent 0.19.0, number for number.

use std::collections::BTreeSet;

use anyhow::{Result, bail};
use serde_json::{Map, Value};

/// A named set of toolset probabilities (percent, 0 to 100).
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub name: String,
    pub description: String,
    /// (toolset, percent), in the order they were defined.
    pub toolsets: Vec<(String, f64)>,
}

impl Distribution {
    fn new(name: &str, description: &str, toolsets: &[(&str, f64)]) -> Distribution {
        Distribution {
            name: name.to_string(),
            description: description.to_string(),
            toolsets: toolsets.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        }
    }

    /// The toolset used when a draw selects nothing: the most probable available one,
    /// the first defined on a tie. `None` when no toolset is available.
    pub fn fallback(&self, available: &BTreeSet<String>) -> Option<&str> {
        let mut best: Option<(&str, f64)> = None;
        for (t, p) in &self.toolsets {
            if available.contains(t) && best.is_none_or(|(_, bp)| *p > bp) {
                best = Some((t, *p));
            }
        }
        best.map(|(t, _)| t)
    }

    /// The exact probability that `toolset` is in a draw, fallback included:
    /// `p(t)` for an available toolset, plus `prod(1 - p)` over all available
    /// toolsets for the fallback one; 0 for an unavailable one.
    pub fn expected_frequency(&self, toolset: &str, available: &BTreeSet<String>) -> f64 {
        if !available.contains(toolset) {
            return 0.0;
        }
        let p = self
            .toolsets
            .iter()
            .find(|(t, _)| t == toolset)
            .map_or(0.0, |(_, p)| p / 100.0);
        if self.fallback(available) == Some(toolset) {
            let none: f64 = self
                .toolsets
                .iter()
                .filter(|(t, _)| available.contains(t))
                .map(|(_, p)| 1.0 - p / 100.0)
                .product();
            p + none
        } else {
            p
        }
    }
}

/// The 17 distributions of the reference as hermes-agent 0.19.0 ships them
/// (`toolset_distributions.DISTRIBUTIONS`): the same names, toolsets, percentages and
/// order (a unit test checks them against a snapshot of the released table); the
/// descriptions are traj's.
pub fn builtin() -> Vec<Distribution> {
    const ALL: f64 = 100.0;
    vec![
        Distribution::new(
            "default",
            "every toolset, always",
            &[
                ("web", ALL),
                ("vision", ALL),
                ("image_gen", ALL),
                ("terminal", ALL),
                ("file", ALL),
                ("browser", ALL),
            ],
        ),
        Distribution::new(
            "image_gen",
            "image generation and vision, some web and terminal",
            &[
                ("image_gen", 90.0),
                ("vision", 90.0),
                ("web", 55.0),
                ("terminal", 45.0),
            ],
        ),
        Distribution::new(
            "research",
            "web research with a browser, some vision",
            &[
                ("web", 90.0),
                ("browser", 70.0),
                ("vision", 50.0),
                ("terminal", 10.0),
            ],
        ),
        Distribution::new(
            "science",
            "web, terminal and files nearly always; vision and browser often",
            &[
                ("web", 94.0),
                ("terminal", 94.0),
                ("file", 94.0),
                ("vision", 65.0),
                ("browser", 50.0),
                ("image_gen", 15.0),
            ],
        ),
        Distribution::new(
            "development",
            "terminal and files first, a little web",
            &[
                ("terminal", 80.0),
                ("file", 80.0),
                ("web", 30.0),
                ("vision", 10.0),
            ],
        ),
        Distribution::new(
            "safe",
            "no terminal and no files",
            &[
                ("web", 80.0),
                ("browser", 70.0),
                ("vision", 60.0),
                ("image_gen", 60.0),
            ],
        ),
        Distribution::new(
            "balanced",
            "each toolset half the time",
            &[
                ("web", 50.0),
                ("vision", 50.0),
                ("image_gen", 50.0),
                ("terminal", 50.0),
                ("file", 50.0),
                ("browser", 50.0),
            ],
        ),
        Distribution::new("minimal", "web only", &[("web", ALL)]),
        Distribution::new(
            "terminal_only",
            "terminal and files",
            &[("terminal", ALL), ("file", ALL)],
        ),
        Distribution::new(
            "terminal_web",
            "terminal, files and web",
            &[("terminal", ALL), ("file", ALL), ("web", ALL)],
        ),
        Distribution::new(
            "creative",
            "image generation and vision, a little web",
            &[("image_gen", 90.0), ("vision", 90.0), ("web", 30.0)],
        ),
        Distribution::new(
            "reasoning",
            "web nearly always, files often, a little terminal",
            &[("web", 90.0), ("file", 60.0), ("terminal", 20.0)],
        ),
        Distribution::new(
            "browser_use",
            "browser always, web and vision often",
            &[("browser", ALL), ("web", 80.0), ("vision", 70.0)],
        ),
        Distribution::new("browser_only", "browser only", &[("browser", ALL)]),
        Distribution::new(
            "browser_tasks",
            "browser nearly always, a little vision and terminal",
            &[("browser", 97.0), ("vision", 12.0), ("terminal", 15.0)],
        ),
        Distribution::new(
            "terminal_tasks",
            "terminal, files and web nearly always; browser often",
            &[
                ("terminal", 97.0),
                ("file", 97.0),
                ("web", 97.0),
                ("browser", 75.0),
                ("vision", 50.0),
                ("image_gen", 10.0),
            ],
        ),
        Distribution::new(
            "mixed_tasks",
            "browser, terminal and files mostly; some web, vision, images",
            &[
                ("browser", 92.0),
                ("terminal", 92.0),
                ("file", 92.0),
                ("web", 35.0),
                ("vision", 15.0),
                ("image_gen", 15.0),
            ],
        ),
    ]
}

/// Read a distributions file's JSON (parsed by the caller, by the one JSON rule every
/// input is read by, so a key written twice is refused before): an object mapping each
/// name to either `{"description": "...", "toolsets": {"web": 50, ...}}` (no other
/// member) or directly to `{"web": 50, ...}`. Percentages are numbers from 0 to 100.
pub fn from_value(v: Value, origin: &str) -> Result<Vec<Distribution>> {
    let Value::Object(top) = v else {
        bail!("{origin}: expected a JSON object mapping names to distributions");
    };
    let mut out = Vec::new();
    for (name, body) in top {
        let Value::Object(body) = body else {
            bail!("{origin}: distribution {name:?}: expected an object");
        };
        let (description, sets): (String, Map<String, Value>) = match body.get("toolsets") {
            Some(Value::Object(sets)) => {
                let description = match body.get("description") {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(_) => {
                        bail!("{origin}: distribution {name:?}: description must be a string")
                    }
                };
                if let Some(k) = body
                    .keys()
                    .find(|k| !matches!(k.as_str(), "description" | "toolsets"))
                {
                    bail!(
                        "{origin}: distribution {name:?}: unknown member {k:?} beside \"toolsets\" (known: description, toolsets)"
                    );
                }
                (description, sets.clone())
            }
            Some(_) => bail!("{origin}: distribution {name:?}: \"toolsets\" must be an object"),
            None => (String::new(), body),
        };
        if sets.is_empty() {
            bail!("{origin}: distribution {name:?} has no toolsets");
        }
        let mut toolsets = Vec::new();
        for (t, p) in sets {
            match p.as_f64() {
                Some(p) if (0.0..=100.0).contains(&p) => toolsets.push((t, p)),
                _ => bail!(
                    "{origin}: distribution {name:?}: toolset {t:?}: expected a percentage from 0 to 100, found {p}"
                ),
            }
        }
        out.push(Distribution {
            name,
            description,
            toolsets,
        });
    }
    Ok(out)
}

/// `base` with `extra` added; a distribution of the same name is replaced in place.
pub fn merge(mut base: Vec<Distribution>, extra: Vec<Distribution>) -> Vec<Distribution> {
    for d in extra {
        match base.iter_mut().find(|b| b.name == d.name) {
            Some(b) => *b = d,
            None => base.push(d),
        }
    }
    base
}

/// The splitmix64 finalizer: a fast, well-mixed 64-bit permutation.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// FNV-1a: a stable hash of a toolset name, and of an Atropos group's messages (std's
/// hashers are not stable across releases).
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The uniform number in [0, 1) that decides `toolset` for row `row_key`.
pub fn uniform(seed: u64, row_key: u64, toolset: &str) -> f64 {
    let x = splitmix64(splitmix64(splitmix64(seed) ^ row_key) ^ fnv1a(toolset));
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Draw the toolsets of one row (in the distribution's order). Unavailable toolsets
/// are never drawn. Empty only when none of the distribution's toolsets is
/// available.
pub fn sample(
    dist: &Distribution,
    seed: u64,
    row_key: u64,
    available: &BTreeSet<String>,
) -> Vec<String> {
    let mut out: Vec<String> = dist
        .toolsets
        .iter()
        .filter(|(t, p)| available.contains(t) && uniform(seed, row_key, t) * 100.0 < *p)
        .map(|(t, _)| t.clone())
        .collect();
    if out.is_empty()
        && let Some(f) = dist.fallback(available)
    {
        out.push(f.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const EVERY: &[&str] = &[
        "web",
        "vision",
        "image_gen",
        "terminal",
        "file",
        "moa",
        "browser",
    ];

    /// Over 20,000 rows, each toolset's frequency is within 1 point of its exact
    /// expected frequency (fallback included), for every built-in distribution, with
    /// every toolset available and with traj's default availability (no browser, no
    /// image generation, no model mixtures).
    #[test]
    fn frequencies_match_probabilities() {
        let n = 20_000u64;
        let availabilities = [set(EVERY), set(&["web", "vision", "terminal", "file"])];
        for available in &availabilities {
            for d in builtin() {
                let mut counts = std::collections::HashMap::new();
                for key in 0..n {
                    let drawn = sample(&d, 42, key, available);
                    assert!(!drawn.is_empty() || d.fallback(available).is_none());
                    for t in drawn {
                        *counts.entry(t).or_insert(0u64) += 1;
                    }
                }
                for (t, p) in &d.toolsets {
                    let got = *counts.get(t).unwrap_or(&0) as f64 / n as f64;
                    let want = d.expected_frequency(t, available);
                    assert!(
                        (got - want).abs() < 0.01,
                        "{}: {t}: frequency {got:.4}, expected {want:.4} (p = {p}%)",
                        d.name
                    );
                    if !available.contains(t) {
                        assert_eq!(got, 0.0);
                    }
                }
            }
        }
    }

    #[test]
    fn fallback_makes_draws_non_empty() {
        let d = Distribution::new("tiny", "", &[("web", 1.0), ("terminal", 2.0)]);
        let avail = set(&["web", "terminal"]);
        let mut fallbacks = 0;
        for key in 0..2000 {
            let s = sample(&d, 7, key, &avail);
            assert!(!s.is_empty());
            if s == ["terminal"] {
                fallbacks += 1;
            }
        }
        assert!(fallbacks > 1900);
        // expected: 0.02 + 0.99 * 0.98
        assert!((d.expected_frequency("terminal", &avail) - (0.02 + 0.99 * 0.98)).abs() < 1e-12);
        assert_eq!(d.fallback(&set(&["web"])), Some("web"));
        assert!(sample(&d, 7, 1, &set(&["file"])).is_empty());
    }

    #[test]
    fn draws_are_deterministic_and_seed_dependent() {
        let d = builtin()
            .into_iter()
            .find(|d| d.name == "balanced")
            .unwrap();
        let avail = set(EVERY);
        let a: Vec<_> = (0..100).map(|k| sample(&d, 1, k, &avail)).collect();
        let b: Vec<_> = (0..100)
            .rev()
            .map(|k| sample(&d, 1, k, &avail))
            .rev()
            .collect();
        assert_eq!(a, b);
        let c: Vec<_> = (0..100).map(|k| sample(&d, 2, k, &avail)).collect();
        assert_ne!(a, c);
        // Pinned: a change of the mixing function changes every dataset.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    /// `builtin()` is the released table: `snapshots/hermes-agent-0.19.0-distributions.json`
    /// is `toolset_distributions.DISTRIBUTIONS` of hermes-agent 0.19.0 dumped with
    /// `json.dumps` (names, toolsets and their order, percentages).
    #[test]
    fn builtins_are_the_released_tables() {
        let text = include_str!("snapshots/hermes-agent-0.19.0-distributions.json");
        let released = parse(text, "snapshot").unwrap();
        let ours = builtin();
        let names = |v: &[Distribution]| v.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&released));
        for (o, r) in ours.iter().zip(&released) {
            assert_eq!(o.toolsets, r.toolsets, "{}", o.name);
        }
        let reasoning = ours.iter().find(|d| d.name == "reasoning").unwrap();
        assert_eq!(reasoning.toolsets[0], ("web".to_string(), 90.0));
        assert!(
            ours.iter()
                .all(|d| d.toolsets.iter().all(|(t, _)| t != "moa"))
        );
    }

    fn parse(text: &str, origin: &str) -> Result<Vec<Distribution>> {
        from_value(serde_json::from_str(text)?, origin)
    }

    #[test]
    fn seventeen_builtins_and_file_overrides() {
        let b = builtin();
        assert_eq!(b.len(), 17);
        let extra = parse(
            r#"{"minimal": {"description": "d", "toolsets": {"terminal": 100}},
                "mine": {"web": 25, "file": 75}}"#,
            "x.json",
        )
        .unwrap();
        let m = merge(b, extra);
        assert_eq!(m.len(), 18);
        assert_eq!(m[7].name, "minimal");
        assert_eq!(m[7].toolsets, vec![("terminal".to_string(), 100.0)]);
        assert_eq!(m[17].toolsets[1], ("file".to_string(), 75.0));
        let e = parse(r#"{"bad": {"web": 150}}"#, "x.json").unwrap_err();
        assert!(
            format!("{e:#}").contains("x.json: distribution \"bad\""),
            "{e:#}"
        );
        // A member beside "toolsets" is no toolset of the distribution: refused.
        for text in [
            r#"{"x": {"toolsets": {"web": 50}, "extra": 1}}"#,
            r#"{"x": {"toolsets": {"web": 50}, "web": 10}}"#,
        ] {
            let e = parse(text, "x.json").unwrap_err();
            assert!(format!("{e:#}").contains("unknown member"), "{e:#}");
        }
    }
}
