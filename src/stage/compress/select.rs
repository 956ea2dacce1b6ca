//! `--sample-percent`: which rows of each input traj-compress compresses, chosen with a
//! seed and kept in input order.

use std::path::Path;

use anyhow::Result;

use super::jobs::Job;
use crate::io::{Records, Select, Shard, Source};

/// A sample to draw: percent of each source (0 < P <= 100), the seed, the shard.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    pub percent: f64,
    pub seed: u64,
    pub shard: Option<Shard>,
}

/// A `--sample-percent` outside 0 < P <= 100.
#[derive(Debug, thiserror::Error)]
#[error("--sample-percent must satisfy 0 < P <= 100, got {0}")]
pub struct PercentError(pub f64);

impl Sampling {
    /// A sampling of `percent` (0 < P <= 100) of each source.
    pub fn new(percent: f64, seed: u64, shard: Option<Shard>) -> Result<Sampling, PercentError> {
        if !(percent > 0.0 && percent <= 100.0) {
            return Err(PercentError(percent));
        }
        Ok(Sampling {
            percent,
            seed,
            shard,
        })
    }
}

/// The sources to read (stdin replaced by its spool file), the lines chosen (numbered
/// across all sources) and their bytes (for the progress bar).
pub struct Sampled {
    pub sources: Vec<Source>,
    pub select: Select,
    pub bytes: u64,
}

/// Choose `max(1, floor(N * p / 100))` of the N rows (non-blank lines that are JSON
/// objects) of each source (none of an empty one), with one RNG seeded once, and every
/// line that is no row (for the bad-line policy); `--shard` then applies to the chosen
/// lines.
/// The sources are read where they are (stdin is spooled to `dir` first, being readable
/// once), so errors and rejects name the input's own file and line.
pub fn sample_sources(sources: Vec<Source>, sampling: Sampling, dir: &Path) -> Result<Sampled> {
    let Sampling {
        percent: p,
        seed,
        shard,
    } = sampling;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut kept = Vec::new();
    let mut chosen: Vec<(u64, u64)> = Vec::new(); // (line across all sources, bytes)
    let mut offset = 0u64;
    for src in sources {
        let src = crate::io::spool_stdin(src, dir)?;
        // The length of each row, for the progress bar; a line that is no JSON object
        // is not drawn from (the sample is of rows, as the reference parses first): it
        // is read in every sample, so the bad-line policy sees it whatever the seed.
        let (mut lens, mut rows, mut bad) = (Vec::new(), Vec::new(), Vec::new());
        let mut r = Records::new(vec![src.clone()], None);
        let mut line = 0u64;
        while let Some(rec) = r.next_record()? {
            let len = rec.bytes.len() as u64 + 1;
            if crate::format::row::validate_object(rec.bytes).is_ok() {
                rows.push(line);
                lens.push(len);
            } else {
                bad.push((offset + line, len));
            }
            line += 1;
        }
        let count = lens.len();
        let want = if count == 0 {
            0
        } else {
            (((count as f64) * p / 100.0).floor() as usize).clamp(1, count)
        };
        // Floyd's algorithm: `want` distinct indices, then in input order.
        let mut picked = std::collections::BTreeSet::new();
        for j in count - want..count {
            let t = rng.usize(0..=j);
            if !picked.insert(t) {
                picked.insert(j);
            }
        }
        chosen.extend(picked.into_iter().map(|i| (offset + rows[i], lens[i])));
        chosen.extend(bad);
        offset += line;
        kept.push(src);
    }
    chosen.sort_unstable();
    if let Some(sh) = shard {
        let mut rank = 0;
        chosen.retain(|_| {
            rank += 1;
            sh.holds(rank - 1)
        });
    }
    let bytes = chosen.iter().map(|&(_, b)| b).sum();
    let lines: std::collections::HashSet<u64> = chosen.into_iter().map(|(k, _)| k).collect();
    Ok(Sampled {
        sources: kept,
        select: Select::new(move |k| lines.contains(&k)),
        bytes,
    })
}

/// Sample every job's sources in place. The returned directory holds stdin's spool:
/// keep it until the jobs have been read.
pub fn sample_jobs(jobs: &mut [Job], sampling: Sampling) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for j in jobs {
        let s = sample_sources(std::mem::take(&mut j.sources), sampling, dir.path())?;
        j.sources = s.sources;
        j.sample = Some((s.select, s.bytes));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two files of `a` and `b` non-blank lines (blank lines between), in `dir`.
    fn files(dir: &Path, a: usize, b: usize) -> Vec<Source> {
        let mut out = Vec::new();
        for (name, n) in [("a.jsonl", a), ("b.jsonl", b)] {
            let text: String = (0..n).map(|i| format!("{{\"i\":{i}}}\n\n")).collect();
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            out.push(Source::File(p));
        }
        out
    }

    fn picked(s: &Sampled, total: u64) -> Vec<u64> {
        (0..total).filter(|&k| s.select.holds(k)).collect()
    }

    fn sample(dir: &Path, p: f64, seed: u64, shard: Option<Shard>) -> Sampled {
        let sampling = Sampling {
            percent: p,
            seed,
            shard,
        };
        sample_sources(files(dir, 40, 7), sampling, dir).unwrap()
    }

    #[test]
    fn percent_must_be_in_range() {
        for p in [0.0, -1.0, 100.5, f64::NAN] {
            assert!(Sampling::new(p, 1, None).is_err(), "{p}");
        }
        assert_eq!(Sampling::new(100.0, 1, None).unwrap().percent, 100.0);
        let e = Sampling::new(0.0, 1, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--sample-percent must satisfy 0 < P <= 100, got 0"
        );
    }

    #[test]
    fn same_seed_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let a = sample(dir.path(), 25.0, 9, None);
        let b = sample(dir.path(), 25.0, 9, None);
        assert_eq!(picked(&a, 47), picked(&b, 47));
        assert_eq!(a.bytes, b.bytes);
        let c = sample(dir.path(), 25.0, 10, None);
        assert_ne!(picked(&a, 47), picked(&c, 47), "the seed decides");
    }

    #[test]
    fn counts_per_source() {
        let dir = tempfile::tempdir().unwrap();
        // 40 * 25% = 10 of the first file, max(1, floor(1.75)) = 1 of the second.
        let s = sample(dir.path(), 25.0, 1, None);
        let p = picked(&s, 47);
        assert_eq!(p.iter().filter(|&&k| k < 40).count(), 10);
        assert_eq!(p.iter().filter(|&&k| k >= 40).count(), 1);
        // Each picked line is `{"i":N}` plus its newline: 8 or 9 bytes.
        assert!((11 * 8..=11 * 9).contains(&s.bytes), "{}", s.bytes);
        assert_eq!(s.sources.len(), 2);
        let all = sample(dir.path(), 100.0, 1, None);
        assert_eq!(picked(&all, 47), (0..47).collect::<Vec<_>>());
    }

    /// 4 bad lines among 3 rows: the sample was drawn from all 7, so 30% could be two
    /// bad lines and no row, and whether a strict run failed depended on the seed.
    #[test]
    fn bad_lines_are_not_drawn_and_always_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.jsonl");
        std::fs::write(
            &p,
            "{\"i\":0}\nnot json\n[1]\n{\"i\":1}\n{bad\n\"s\"\n{\"i\":2}\n",
        )
        .unwrap();
        for seed in 0..8 {
            let sampling = Sampling::new(30.0, seed, None).unwrap();
            let s = sample_sources(vec![Source::File(p.clone())], sampling, dir.path()).unwrap();
            let got = picked(&s, 7);
            let rows: Vec<u64> = got
                .iter()
                .copied()
                .filter(|k| [0, 3, 6].contains(k))
                .collect();
            assert_eq!(rows.len(), 1, "seed {seed}: one row of three: {got:?}");
            for bad in [1, 2, 4, 5] {
                assert!(
                    got.contains(&bad),
                    "seed {seed}: bad line {bad} read: {got:?}"
                );
            }
        }
    }

    #[test]
    fn shard_splits_the_chosen_rows() {
        let dir = tempfile::tempdir().unwrap();
        let whole = picked(&sample(dir.path(), 50.0, 3, None), 47);
        let mut union = Vec::new();
        for index in 0..3 {
            let sh = Shard { index, count: 3 };
            let part = picked(&sample(dir.path(), 50.0, 3, Some(sh)), 47);
            let expect: Vec<u64> = whole
                .iter()
                .enumerate()
                .filter(|(rank, _)| *rank as u64 % 3 == index)
                .map(|(_, &k)| k)
                .collect();
            assert_eq!(part, expect);
            union.extend(part);
        }
        union.sort();
        assert_eq!(union, whole);
    }

    #[test]
    fn empty_source_gives_none() {
        let dir = tempfile::tempdir().unwrap();
        let sampling = Sampling {
            percent: 50.0,
            seed: 1,
            shard: None,
        };
        let s = sample_sources(files(dir.path(), 0, 4), sampling, dir.path()).unwrap();
        assert_eq!(picked(&s, 4), picked(&s, 100));
        assert_eq!(picked(&s, 4).len(), 2);
    }
}
