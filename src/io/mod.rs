//! Line input and output shared by every stage: where lines come from ([`source`]:
//! files, gzip and zstd, stdin, directories; [`jsonarray`]: JSON-array files as rows;
//! [`parquet`]: Parquet in and out),
//! how bytes become lines ([`lines`]), the one rule for a line as a JSON object
//! ([`json`]), the bad-line policy ([`policy`]), rejects ([`rejects`]), atomic output
//! ([`output`]: a run's outputs committed together), temp files named after their
//! process and removed on signals or, stale, by a later run ([`temp`]), the serial reader ([`records`]), and the two ordered parallel pipelines: [`pipeline`] for stages that
//! rewrite lines, [`passthru`] (zero-copy) for stages that keep or drop them.

pub mod json;
pub mod jsonarray;
pub mod lines;
pub mod output;
pub mod parquet;
pub mod passthru;
mod pieces;
pub mod pipeline;
pub mod policy;
pub mod records;
pub mod rejects;
pub mod source;
pub mod targets;
pub mod temp;

pub use json::{
    FIELD_DEPTH, ItemTexts, ListRule, PartRow, json_kind, parse_object, parse_object_in_part,
    parse_value, parse_value_prefix,
};
pub use lines::{Cut, Line, LineReader, Raw, cut_line, is_blank, line_range, trim_line};
pub use output::{Commit, Compression, Output, Sink, commit};
pub(crate) use pipeline::{Panic, in_order};
pub use pipeline::{PipeConfig, process};
pub use policy::{LineError, OnError, Select, Shard, Summary, Verdict};
pub use records::{Record, Records, Tally};
pub use rejects::{Rejects, reject_line};
pub use source::{
    BUF_SIZE, Glob, PassedOver, Source, data_files_in, is_batch_file, is_run_dir,
    is_stage_document, jsonl_files_in, natural_cmp, no_data_files, open_source, raw_file,
    row_sources, sources_from_args, sources_matching, sources_with_prefix, spool_stdin,
};
pub use targets::{TargetError, check_targets, is_input, onto_input_with_loss};

/// The configuration the pipelines' tests run with.
#[cfg(test)]
pub(crate) fn test_pipe(on_error: OnError, jobs: usize, drops_are_loss: bool) -> PipeConfig {
    PipeConfig {
        stage: "test",
        on_error,
        jobs,
        drops_are_loss,
        select: None,
        batch_lines: 0,
    }
}

#[cfg(test)]
pub(crate) fn write_tmp(dir: &std::path::Path, name: &str, data: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}
