//! Per-loop timings and the minimum-bytes model, reported as a table or JSON
//! (`PARLOOP_PROFILE=1` or `PARLOOP_PROFILE=json:FILE`, or `Runtime::report`).

use std::fmt::Write as _;
use std::time::Duration;

/// Accumulated statistics of one kernel's loops.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopReport {
    /// Kernel name.
    pub name: String,
    /// The kernel's path (`solver::mass::assemble`; a library operation's
    /// name): two kernels of one name in different modules have a row
    /// each, and tables show their paths.
    pub path: String,
    /// The loop's tags, comma-joined (empty when untagged): a kernel run
    /// with different tags has a row per tag list.
    pub tags: String,
    /// Executions.
    pub calls: u64,
    /// Total time executing, plan construction excluded, in seconds.
    pub seconds: f64,
    /// Time spent building plans, in seconds.
    pub plan_seconds: f64,
    /// Minimum bytes moved over all executions (the planner's byte model).
    pub bytes: u64,
    /// Halo bytes sent per dat, over all executions (distributed runs).
    pub halo_bytes: Vec<(String, u64)>,
    /// Halo messages sent, over all executions.
    pub halo_messages: u64,
    /// Time spent waiting for halo messages, in seconds.
    pub mpi_wait_seconds: f64,
}

impl LoopReport {
    /// The loop's name in tables and NVTX ranges: `kernel` or
    /// `kernel [tag,tag]`.
    pub fn label(&self) -> String {
        label(&self.name, &self.tags)
    }

    /// Mean time per execution, in seconds.
    pub fn mean_seconds(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.seconds / self.calls as f64
        }
    }

    /// Achieved bandwidth at the minimum-bytes model, in GB/s (1e9 bytes).
    pub fn gb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }
}

/// All loops' statistics, in order of first execution.
#[derive(Default)]
pub(crate) struct Profile {
    loops: Vec<LoopReport>,
    /// The row recorded last: a time step runs the same few loops, often
    /// one kernel many times in a row (a fused replay), so it is tried
    /// before the search.
    last: usize,
    /// Per row, the address of the kernel path it was made with (see
    /// `row`).
    path_at: Vec<usize>,
}

impl Profile {
    /// The row of loop (`path`, `tags`), the last-used row tried first.
    /// Rows are found by the address of the kernel's path (a `&'static
    /// str`: the same address and length are the same path) before any
    /// string comparison: comparing names byte by byte at every loop, two
    /// searches per loop, took a fifth of the airfoil's time on a 4x4
    /// grid (`memcmp` per row). Paths equal at other addresses (one
    /// kernel's path in two copies) still share a row, found by comparison.
    fn row(&self, path: &'static str, tags: &str) -> Option<usize> {
        let same_tags = |l: &LoopReport| l.tags.len() == tags.len() && (tags.is_empty() || l.tags == tags);
        let at = path.as_ptr() as usize;
        let by_address = |&i: &usize| {
            let l = &self.loops[i];
            self.path_at[i] == at && l.path.len() == path.len() && same_tags(l)
        };
        if self.last < self.loops.len() && by_address(&self.last) {
            return Some(self.last);
        }
        (0..self.loops.len())
            .find(by_address)
            .or_else(|| self.loops.iter().position(|l| l.path == path && same_tags(l)))
    }

    /// Adds one execution of loop (`path`, `tags`): a kernel's
    /// [`Kernel::path`](crate::Kernel::path), or a library operation's name.
    pub fn record(&mut self, (path, tags): (&'static str, &str), run: Duration, plan: Duration, bytes: u64) {
        let entry = match self.row(path, tags) {
            Some(i) => {
                self.last = i;
                &mut self.loops[i]
            }
            None => {
                self.last = self.loops.len();
                let name = path.rsplit("::").next().unwrap_or(path);
                self.loops.push(LoopReport {
                    name: name.into(),
                    path: path.into(),
                    tags: tags.into(),
                    ..LoopReport::default()
                });
                self.path_at.push(path.as_ptr() as usize);
                self.loops.last_mut().expect("just pushed")
            }
        };
        entry.calls += 1;
        entry.seconds += run.as_secs_f64();
        entry.plan_seconds += plan.as_secs_f64();
        entry.bytes += bytes;
    }

    /// Adds one execution's halo traffic to loop (`path`, `tags`)
    /// (recorded before).
    pub(crate) fn record_halo(&mut self, (path, tags): (&'static str, &str), t: crate::distribution::HaloTraffic) {
        // Usually the row `record` just found.
        let Some(i) = self.row(path, tags) else { return };
        let entry = &mut self.loops[i];
        entry.halo_messages += t.messages;
        entry.mpi_wait_seconds += t.wait.as_secs_f64();
        for (dat, b) in t.bytes {
            match entry.halo_bytes.iter_mut().find(|(d, _)| *d == dat) {
                Some((_, total)) => *total += b,
                None => entry.halo_bytes.push((dat, b)),
            }
        }
    }

    pub fn reports(&self) -> Vec<LoopReport> {
        self.loops.clone()
    }
}

/// `kernel` or `kernel [tags]`.
pub(crate) fn label(name: &str, tags: &str) -> String {
    if tags.is_empty() {
        name.to_string()
    } else {
        format!("{name} [{tags}]")
    }
}

/// The profile as a text table; the first column is as wide as the
/// longest label (at least 16), so long names (`linalg_cg_update_jacobi`,
/// tags) keep the columns aligned.
pub fn table(reports: &[LoopReport]) -> String {
    // Kernels of one name from different modules are told apart by path.
    let shared_name = |r: &LoopReport| reports.iter().any(|o| o.name == r.name && o.path != r.path);
    let labels: Vec<String> =
        reports.iter().map(|r| if shared_name(r) { label(&r.path, &r.tags) } else { r.label() }).collect();
    let w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(16);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<w$} {:>8} {:>11} {:>11} {:>10} {:>9}",
        "loop", "calls", "total s", "mean us", "plan ms", "GB/s"
    );
    for (r, l) in reports.iter().zip(&labels) {
        let _ = writeln!(
            s,
            "{:<w$} {:>8} {:>11.4} {:>11.2} {:>10.3} {:>9.2}",
            l,
            r.calls,
            r.seconds,
            r.mean_seconds() * 1e6,
            r.plan_seconds * 1e3,
            r.gb_per_s()
        );
    }
    let total: f64 = reports.iter().fold(0.0, |sum, r| sum + r.seconds);
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let _ = writeln!(
        s,
        "{:<w$} {:>8} {:>11.4} {:>11} {:>10.3} {:>9.2}",
        "total",
        reports.iter().map(|r| r.calls).sum::<u64>(),
        total,
        "",
        reports.iter().fold(0.0, |sum, r| sum + r.plan_seconds) * 1e3,
        if total > 0.0 { bytes as f64 / total / 1e9 } else { 0.0 }
    );
    s
}

/// The lazy trace's counters and forcing points, as text (appended to
/// the table when the trace is on).
pub fn trace_table(stats: &crate::trace::TraceStats, points: &[crate::trace::ForcingPoint]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "lazy trace: {} loops and {} host writes recorded ({} computations, {} edges), {} run, {} forces ({} found nothing), {} eager, {} discarded, {} halo exchanges skipped, {} removed, {} replays ({} loops, {} fallbacks), {} loops fused, {} temporaries reused, {} records reused",
        stats.loops_recorded,
        stats.host_writes_recorded,
        stats.computations_recorded,
        stats.edges_recorded,
        stats.loops_run,
        // Every force, and those of them that ran nothing (the table
        // below counts both; "2 forces (4 found nothing)" read as a
        // contradiction).
        stats.forces + stats.forces_empty,
        stats.forces_empty,
        stats.eager_fallbacks,
        stats.discarded,
        stats.exchanges_skipped,
        stats.exchanges_removed,
        stats.replays,
        stats.loops_replayed,
        stats.replay_fallbacks,
        stats.loops_fused,
        stats.temporaries_reused,
        stats.records_reused
    );
    let _ = writeln!(s, "{:<48} {:>8} {:>10}", "forced at", "forces", "loops run");
    for p in points {
        let _ = writeln!(s, "{:<48} {:>8} {:>10}", p.location, p.count, p.loops);
    }
    s
}

/// The profile as JSON: `{"loops": [{"name", "calls", "seconds", ...}]}`.
pub fn json(reports: &[LoopReport]) -> String {
    let loops: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "path": r.path,
                "tags": r.tags,
                "calls": r.calls,
                "seconds": r.seconds,
                "mean_seconds": r.mean_seconds(),
                "plan_seconds": r.plan_seconds,
                "bytes": r.bytes,
                "gb_per_s": r.gb_per_s(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "loops": loops })).expect("plain values serialise")
}

/// A named NVTX range, open until dropped (a no-op without feature `nvtx`).
pub(crate) struct Range;

impl Range {
    #[inline]
    pub fn new(_name: &str) -> Range {
        #[cfg(feature = "nvtx")]
        nvtx::__private::_range_push(_name);
        Range
    }

    /// A range whose name is only built when NVTX is compiled in.
    #[inline]
    pub fn lazy(_name: impl FnOnce() -> String) -> Range {
        #[cfg(feature = "nvtx")]
        nvtx::__private::_range_push(_name());
        Range
    }
}

impl Drop for Range {
    #[inline]
    fn drop(&mut self) {
        #[cfg(feature = "nvtx")]
        nvtx::__private::_range_pop();
    }
}

#[cfg(test)]
mod tests {
    /// An empty profile's totals are +0: a `Sum` of no f64 is -0.0, which
    /// printed as "-0.0000" (a program that ran no loops).
    #[test]
    fn empty_totals_are_not_negative_zero() {
        let table = super::table(&[]);
        assert!(table.contains("total"), "{table}");
        assert!(!table.contains("-0"), "{table}");
    }

    /// A label longer than the first column's 16 characters pushed its row's
    /// numbers right of the header's (`linalg_cg_update_jacobi`).
    #[test]
    fn long_labels_keep_the_columns_aligned() {
        let report = |name: &str| super::LoopReport {
            name: name.into(),
            path: name.into(),
            tags: String::new(),
            calls: 3,
            seconds: 0.5,
            plan_seconds: 0.0,
            bytes: 0,
            halo_bytes: Vec::new(),
            halo_messages: 0,
            mpi_wait_seconds: 0.0,
        };
        let table = super::table(&[report("res"), report("linalg_cg_update_jacobi")]);
        // Right-aligned columns after a padded first one: every line as long.
        let lengths: Vec<usize> = table.lines().map(|l| l.len()).collect();
        assert!(lengths.len() == 4 && lengths.windows(2).all(|w| w[0] == w[1]), "{table}");
    }
}
