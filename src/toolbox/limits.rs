//! Resource limits of tool processes: what is limited, the `prlimit` command line
//! that sets the limits, and how a command's result shows which limit it hit.

/// Resource limits of every process a tool call starts (local and bwrap; set with
/// util-linux `prlimit`, soft and hard alike, so a command cannot raise them). 0 = no
/// limit. A command killed by its CPU or file-size limit, or that reports running out
/// of memory or processes, gets a tool error saying which limit it hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// Address space per process, MiB (`RLIMIT_AS`).
    pub memory_mb: u64,
    /// Processes of the user (`RLIMIT_NPROC`; not enforced for root).
    pub processes: u64,
    /// Largest file a process may write, MiB (`RLIMIT_FSIZE`).
    pub file_size_mb: u64,
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_secs: u64,
}

/// The smallest address-space limit (MiB) a pod's supervisor sets on itself; below
/// it the limit is set per command with `prlimit` ([`Limits::pod_split`]).
pub const POD_AS_FLOOR_MB: u64 = 1024;

/// The smallest CPU limit (seconds) a pod's supervisor sets on itself (it retires at
/// half of it: [`super::pod`]); below it the limit is set per command.
pub const POD_CPU_FLOOR_SECS: u64 = 60;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: 8192,
            processes: 4096,
            file_size_mb: 1024,
            cpu_secs: 300,
        }
    }
}

impl Limits {
    /// No limits at all.
    pub const NONE: Limits = Limits {
        memory_mb: 0,
        processes: 0,
        file_size_mb: 0,
        cpu_secs: 0,
    };

    /// `prlimit` and its options, or nothing when no limit is set.
    pub(crate) fn prefix(&self) -> Vec<String> {
        let mut a = Vec::new();
        let mb = 1024 * 1024;
        for (flag, v) in [
            ("--as", self.memory_mb.saturating_mul(mb)),
            ("--nproc", self.processes),
            ("--fsize", self.file_size_mb.saturating_mul(mb)),
        ] {
            if v > 0 {
                a.push(format!("{flag}={v}"));
            }
        }
        // The hard CPU limit one second above the soft one: at the soft limit the
        // process gets SIGXCPU (which says what happened), at the hard one SIGKILL.
        if self.cpu_secs > 0 {
            a.push(format!("--cpu={}:{}", self.cpu_secs, self.cpu_secs + 1));
        }
        if !a.is_empty() {
            a.insert(0, "prlimit".to_string());
            a.push("--".to_string());
        }
        a
    }

    /// How a pod ([`super::pod`]) applies these limits: the ones its supervisor sets
    /// on itself, which every command it starts inherits (no `prlimit` process per
    /// call), and the `prlimit` prefix of each command for the rest: an address-space
    /// limit under [`POD_AS_FLOOR_MB`] or a CPU limit under [`POD_CPU_FLOOR_SECS`],
    /// which the supervisor itself could not live with.
    pub(crate) fn pod_split(&self) -> (Limits, Vec<String>) {
        let small_as = self.memory_mb > 0 && self.memory_mb < POD_AS_FLOOR_MB;
        let small_cpu = self.cpu_secs > 0 && self.cpu_secs < POD_CPU_FLOOR_SECS;
        let per_command = Limits {
            memory_mb: if small_as { self.memory_mb } else { 0 },
            cpu_secs: if small_cpu { self.cpu_secs } else { 0 },
            ..Limits::NONE
        };
        let own = Limits {
            memory_mb: if small_as { 0 } else { self.memory_mb },
            cpu_secs: if small_cpu { 0 } else { self.cpu_secs },
            ..*self
        };
        (own, per_command.prefix())
    }

    /// Set these limits on this process (soft and hard, as [`Limits::prefix`] does), so
    /// that every process it starts inherits them; and no POSIX message queue
    /// (`RLIMIT_MSGQUEUE` 0).
    pub(crate) fn apply_to_self(&self) -> std::io::Result<()> {
        use rustix::process::{Resource, Rlimit, setrlimit};
        let mb = 1024 * 1024;
        let both = |v: u64| Rlimit {
            current: Some(v),
            maximum: Some(v),
        };
        for (resource, v) in [
            (Resource::As, self.memory_mb.saturating_mul(mb)),
            (Resource::Nproc, self.processes),
            (Resource::Fsize, self.file_size_mb.saturating_mul(mb)),
        ] {
            if v > 0 {
                setrlimit(resource, both(v))?;
            }
        }
        if self.cpu_secs > 0 {
            let cpu = Rlimit {
                current: Some(self.cpu_secs),
                maximum: Some(self.cpu_secs + 1),
            };
            setrlimit(Resource::Cpu, cpu)?;
        }
        setrlimit(Resource::Msgqueue, both(0))?;
        Ok(())
    }

    /// Which limit a command's result shows it hit, as the model is told.
    pub fn hit(&self, exit_code: i32, output: &str) -> Option<String> {
        const SIGXCPU: i32 = 24;
        const SIGXFSZ: i32 = 25;
        if self.cpu_secs > 0
            && (exit_code == 128 + SIGXCPU || output.contains("CPU time limit exceeded"))
        {
            return Some(format!(
                "the CPU time limit ({} s per process) was reached; the process was killed",
                self.cpu_secs
            ));
        }
        if self.file_size_mb > 0
            && (exit_code == 128 + SIGXFSZ || output.contains("File size limit exceeded"))
        {
            return Some(format!(
                "the file size limit ({} MiB per file) was reached; the writing process was killed",
                self.file_size_mb
            ));
        }
        if exit_code == 0 {
            return None;
        }
        // A limit that is set and that the output names in one of its usual words.
        let named =
            |limit: u64, words: &[&str]| limit > 0 && words.iter().any(|w| output.contains(w));
        let memory = [
            "MemoryError",
            "Cannot allocate memory",
            "out of memory",
            "std::bad_alloc",
        ];
        let fork = [
            "fork: Resource temporarily unavailable",
            "Cannot fork",
            "can't fork",
        ];
        if named(self.memory_mb, &memory) {
            return Some(format!(
                "the memory limit ({} MiB of address space per process) was probably reached",
                self.memory_mb
            ));
        }
        if named(self.processes, &fork) {
            return Some(format!(
                "the process limit ({}) was probably reached",
                self.processes
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prlimit_line_and_hits() {
        assert!(Limits::NONE.prefix().is_empty());
        let l = Limits {
            memory_mb: 1,
            processes: 2,
            file_size_mb: 3,
            cpu_secs: 4,
        };
        assert_eq!(
            l.prefix(),
            [
                "prlimit",
                "--as=1048576",
                "--nproc=2",
                "--fsize=3145728",
                "--cpu=4:5",
                "--"
            ]
        );
        assert!(l.hit(152, "").unwrap().contains("CPU time limit (4 s"));
        assert!(l.hit(153, "").unwrap().contains("file size limit (3 MiB"));
        assert!(l.hit(1, "MemoryError\n").unwrap().contains("memory limit"));
        assert!(
            l.hit(2, "sh: 1: Cannot fork\n")
                .unwrap()
                .contains("process limit")
        );
        assert_eq!(l.hit(0, "MemoryError is a Python class"), None);
        assert_eq!(l.hit(1, "plain failure"), None);
        assert_eq!(Limits::NONE.hit(152, ""), None);
    }

    #[test]
    fn a_pod_sets_large_limits_on_its_supervisor_and_small_ones_per_command() {
        let d = Limits::default();
        assert_eq!(d.pod_split(), (d, Vec::<String>::new()));
        let small = Limits {
            memory_mb: 256,
            processes: 20,
            file_size_mb: 1,
            cpu_secs: 1,
        };
        let (own, prefix) = small.pod_split();
        assert_eq!(
            own,
            Limits {
                memory_mb: 0,
                cpu_secs: 0,
                ..small
            }
        );
        assert_eq!(prefix, ["prlimit", "--as=268435456", "--cpu=1:2", "--"]);
        assert_eq!(Limits::NONE.pod_split(), (Limits::NONE, Vec::new()));
    }
}
