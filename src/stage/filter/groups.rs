//! The group predicates of traj-filter: `--best-of` (keep the highest-reward rollout of
//! each task: rejection-sampling SFT data) and `--group-has-signal` (drop the tasks
//! whose rewards are all equal: no gradient for GRPO), and the reward figures of
//! `--stats`.
//!
//! A group predicate needs every rollout of a task before it can judge one, and the
//! rollouts of a task may lie anywhere in the input. So the input is read twice: the
//! first read ([`Plan::add`], one line at a time, in input order) judges each line by
//! the row predicates and notes its task ([`task_and_reward`]) and
//! reward; [`Plan::finish`] then decides each task; the second read takes each line's
//! verdict from the plan ([`Plan::verdict`], by the line's number among the lines read).
//! Memory is a few bytes per line and the reasons of the lines that fail, never the
//! rows themselves.
//!
//! A task is judged by its rows that pass the row predicates and have a reward: with
//! `--well-formed --best-of`, the best well-formed rollout is kept. Ties keep the first
//! in input order. A row with no task (`task_uid`, `prompt_index`) or no numeric
//! `reward` is dropped by a group predicate, with that reason.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;

use crate::format::groups::RewardStatistics;
pub use crate::format::groups::task_and_reward;
use crate::io::{PipeConfig, Record, Records, Rejects, Source, Summary, Tally, Verdict};

use super::reason;

/// The group predicates of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupRules {
    pub best_of: bool,
    pub has_signal: bool,
}

impl GroupRules {
    pub fn any(&self) -> bool {
        self.best_of || self.has_signal
    }
}

/// A line judged by the row predicates: the failed predicates (empty: it passes), the
/// row's task and its reward.
pub type Judged = (Vec<String>, Option<String>, Option<f64>);

/// What the first read learnt of one line.
#[derive(Debug)]
enum Seen {
    /// Bad input (judged again by the second read's policy).
    Bad(String),
    /// A tombstone ([`crate::format::row::tombstone`]): dropped, also under `invert`.
    Tombstone(String),
    /// Fails a row predicate.
    Failed(Vec<String>),
    /// Passes the row predicates.
    Passed {
        task: Option<u32>,
        reward: Option<f64>,
        /// Why the row cannot be judged with its group (no task, no reward).
        unjudged: Option<String>,
    },
}

/// One task's rollouts that passed the row predicates.
#[derive(Debug, Default)]
struct Task {
    name: String,
    rewards: Vec<f64>,
    /// The line of the first rollout with the highest reward.
    best: Option<(usize, f64)>,
}

/// The verdicts of the first read, and then of every task.
#[derive(Debug, Default)]
pub struct Plan {
    lines: Vec<Seen>,
    ids: HashMap<String, u32>,
    tasks: Vec<Task>,
}

impl Plan {
    /// Note the next line: bad input (`Err`), or the row's failed predicates (empty:
    /// it passes) with its task and reward.
    pub fn add(&mut self, judged: Result<Judged, String>) {
        let seen = match judged {
            Err(e) => Seen::Bad(e),
            Ok((reasons, _, _)) if !reasons.is_empty() => Seen::Failed(reasons),
            Ok((_, None, reward)) => Seen::Passed {
                task: None,
                reward,
                unjudged: Some(crate::format::groups::NO_TASK.to_string()),
            },
            Ok((_, Some(name), None)) => Seen::Passed {
                task: Some(self.id(name)),
                reward: None,
                unjudged: Some(format!(
                    "{}: no numeric `reward` to judge it in its group",
                    reason::NO_REWARD
                )),
            },
            Ok((_, Some(name), Some(r))) => {
                let id = self.id(name);
                let line = self.lines.len();
                let t = &mut self.tasks[id as usize];
                t.rewards.push(r);
                if t.best.is_none_or(|(_, b)| r > b) {
                    t.best = Some((line, r));
                }
                Seen::Passed {
                    task: Some(id),
                    reward: Some(r),
                    unjudged: None,
                }
            }
        };
        self.lines.push(seen);
    }

    /// Note the next line, a tombstone dropped for `why`.
    pub fn add_tombstone(&mut self, why: String) {
        self.lines.push(Seen::Tombstone(why));
    }

    fn id(&mut self, name: String) -> u32 {
        if let Some(&id) = self.ids.get(&name) {
            return id;
        }
        let id = self.tasks.len() as u32;
        self.tasks.push(Task {
            name: name.clone(),
            ..Task::default()
        });
        self.ids.insert(name, id);
        id
    }

    /// Lines noted.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The verdict of line `index` (0-based, among the lines noted) under `rules`, and
    /// `invert` (keep what fails).
    pub fn verdict(&self, index: usize, rules: GroupRules, invert: bool) -> Verdict {
        let reasons = match &self.lines[index] {
            Seen::Bad(e) => return Verdict::Bad(e.clone()),
            Seen::Tombstone(why) => return Verdict::Discarded(vec![why.clone()]),
            Seen::Failed(r) => r.clone(),
            Seen::Passed {
                unjudged: Some(why),
                ..
            } => vec![why.clone()],
            Seen::Passed {
                task: Some(id),
                reward: Some(r),
                unjudged: None,
            } => self.group_reasons(index, *id, *r, rules),
            Seen::Passed { .. } => unreachable!("a judged row has a task and a reward"),
        };
        match (reasons.is_empty(), invert) {
            (true, false) | (false, true) => Verdict::Written,
            (true, true) => Verdict::Dropped(vec!["inverted: passes every predicate".into()]),
            (false, false) => Verdict::Dropped(reasons),
        }
    }

    fn group_reasons(&self, index: usize, id: u32, reward: f64, rules: GroupRules) -> Vec<String> {
        let t = &self.tasks[id as usize];
        let mut reasons = Vec::new();
        if rules.has_signal {
            let (min, max) = t
                .rewards
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &r| {
                    (a.min(r), b.max(r))
                });
            if max <= min {
                reasons.push(format!(
                    "{}: the {} rollout(s) of task {} all have reward {reward}",
                    reason::NO_SIGNAL,
                    t.rewards.len(),
                    t.name
                ));
            }
        }
        if rules.best_of
            && let Some((best_line, best)) = t.best
            && best_line != index
        {
            reasons.push(if reward < best {
                format!(
                    "{}: reward {reward} below the best {best} of task {}",
                    reason::NOT_BEST,
                    t.name
                )
            } else {
                format!(
                    "{}: reward {reward} ties the best of task {}, kept on an earlier line",
                    reason::NOT_BEST,
                    t.name
                )
            });
        }
        reasons
    }
}

/// What [`run`] needs to judge a line by the row predicates: the failed predicates
/// (empty: it passes), the row's task and reward; `Err`: bad input.
pub type JudgeRow<'a> = &'a (dyn Fn(&[u8]) -> Result<Judged, String> + Sync);

/// Run the group predicates over `sources` (see the module documentation), writing the
/// kept lines, unchanged, to `out`; `seen(line, kept)` is called once per line of the
/// second read (for `--stats`). stdin is spooled to a private temp folder to be read
/// twice; its lines are still named `<stdin>`.
pub fn run(
    cfg: &PipeConfig,
    sources: Vec<Source>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    (judge, rules, invert): (JudgeRow<'_>, GroupRules, bool),
    seen: &dyn Fn(&[u8], bool),
) -> anyhow::Result<Summary> {
    let tmp = crate::io::temp::temp_dir(None, "traj-filter-")?;
    let names: Vec<Arc<str>> = sources.iter().map(|s| Arc::from(s.name())).collect();
    let sources = sources
        .into_iter()
        .map(|s| crate::io::spool_stdin(s, tmp.path()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut plan = Plan::default();
    let mut first = Records::new(sources.clone(), cfg.select.clone());
    while let Some(rec) = first.next_record()? {
        match crate::format::row::tombstone(rec.bytes) {
            Some(why) => plan.add_tombstone(why),
            None => plan.add(judge(rec.bytes)),
        }
    }
    let (on_error, drops_are_loss) = cfg.policy();
    let mut tally = Tally::new(on_error, drops_are_loss, rejects);
    let mut second = Records::new(sources, cfg.select.clone());
    let mut index = 0;
    while let Some(rec) = second.next_record()? {
        anyhow::ensure!(
            index < plan.len(),
            "{}: the input changed between its two reads",
            rec.source
        );
        let verdict = plan.verdict(index, rules, invert);
        index += 1;
        let kept = matches!(verdict, Verdict::Written);
        if kept {
            out.write_all(rec.bytes)?;
            out.write_all(b"\n")?;
        }
        seen(rec.bytes, kept);
        let rec = Record {
            source: &names[rec.source_index],
            ..rec
        };
        tally.account(&rec, verdict)?;
    }
    anyhow::ensure!(
        index == plan.len(),
        "the input changed between its two reads"
    );
    Ok(tally.summary)
}

/// The rewards of the rows read and of the rows kept, per task, for `--stats`.
#[derive(Debug, Default)]
pub struct Rewards {
    pub read: BTreeMap<String, Vec<f64>>,
    pub kept: BTreeMap<String, Vec<f64>>,
}

impl Rewards {
    /// Count a row's reward (rows without a task or a reward count nowhere).
    pub fn add(&mut self, task: Option<String>, reward: Option<f64>, kept: bool) {
        let (Some(task), Some(r)) = (task, reward) else {
            return;
        };
        if kept {
            self.kept.entry(task.clone()).or_default().push(r);
        }
        self.read.entry(task).or_default().push(r);
    }

    /// `rewards` and `rewards_kept` of `--stats` (each absent when no row has a reward).
    pub fn figures(
        mut self,
        threshold: f64,
    ) -> (Option<RewardStatistics>, Option<RewardStatistics>) {
        (
            RewardStatistics::of(&mut self.read, threshold),
            RewardStatistics::of(&mut self.kept, threshold),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rows: &[(&str, Option<f64>)]) -> Plan {
        let mut p = Plan::default();
        for (task, r) in rows {
            let task = (!task.is_empty()).then(|| task.to_string());
            p.add(Ok((Vec::new(), task, *r)));
        }
        p
    }

    fn kept(p: &Plan, rules: GroupRules) -> Vec<usize> {
        kept_as(p, rules, false)
    }

    fn kept_as(p: &Plan, rules: GroupRules, invert: bool) -> Vec<usize> {
        (0..p.len())
            .filter(|&i| matches!(p.verdict(i, rules, invert), Verdict::Written))
            .collect()
    }

    #[test]
    fn best_of_keeps_the_first_highest_reward_of_each_task() {
        let p = plan(&[
            ("a", Some(0.0)),
            ("b", Some(1.0)),
            ("a", Some(1.0)),
            ("a", Some(1.0)),
            ("b", Some(0.5)),
            ("", Some(1.0)),
            ("c", None),
        ]);
        let best = GroupRules {
            best_of: true,
            ..GroupRules::default()
        };
        assert_eq!(kept(&p, best), vec![1, 2]);
        match p.verdict(3, best, false) {
            Verdict::Dropped(r) => assert!(r[0].contains("kept on an earlier line"), "{r:?}"),
            v => panic!("{v:?}"),
        }
        match p.verdict(5, best, false) {
            Verdict::Dropped(r) => assert!(r[0].starts_with("no-task: "), "{r:?}"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn groups_without_signal_are_dropped_whole() {
        let p = plan(&[
            ("a", Some(1.0)),
            ("b", Some(1.0)),
            ("a", Some(1.0)),
            ("b", Some(0.0)),
            ("c", Some(0.0)),
        ]);
        let signal = GroupRules {
            has_signal: true,
            ..GroupRules::default()
        };
        assert_eq!(kept(&p, signal), vec![1, 3]);
        let both = GroupRules {
            has_signal: true,
            best_of: true,
        };
        assert_eq!(kept(&p, both), vec![1]);
        // --invert keeps exactly the others
        assert_eq!(kept_as(&p, both, true), vec![0, 2, 3, 4]);
    }

    #[test]
    fn rows_failing_a_row_predicate_do_not_count_in_their_group() {
        let mut p = Plan::default();
        p.add(Ok((
            vec!["malformed: x".into()],
            Some("a".into()),
            Some(1.0),
        )));
        p.add(Ok((Vec::new(), Some("a".into()), Some(0.0))));
        p.add(Err("invalid JSON".into()));
        let best = GroupRules {
            best_of: true,
            ..GroupRules::default()
        };
        assert_eq!(kept(&p, best), vec![1]);
        assert!(matches!(p.verdict(2, best, false), Verdict::Bad(_)));
    }
}
