//! The command line's top: `Cli` and the `Command` list. Each command's
//! arguments live beside its handler in `commands/<name>.rs`, and the
//! groups several commands share in `args.rs`; nothing there refers back
//! here (`module_arrows_run_one_way` below keeps it so).

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands::{
    agent, bench, calibrate, check, compare, compile, completions, discover, export, import,
    kernel, merge, mount, plot, pull, replay, report, run, trace,
};

/// `fsprof --version`: the release and the commit it was built from
/// (`build.rs`; "unknown" when built outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FSPROF_GIT_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(name = "fsprof", version = VERSION, about = "Shows where file-system time goes", long_about = None, after_long_help = EXIT_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// A subcommand's arguments, built only when that subcommand is the one
/// being parsed (clap's `Command::defer`). Building all of them for every
/// run (some 200 arguments across the commands) was a third of the
/// instructions `fsprof run -- true` spends before starting the command
/// (callgrind; docs/benchmarks.md, "Start-up"). Completions, man pages and
/// `--help` build everything as before.
#[derive(Debug)]
pub struct Lazy<T>(pub T);

impl<T: FromArgMatches> FromArgMatches for Lazy<T> {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(m).map(Lazy)
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(m)
    }
}

impl<T: Args> Args for Lazy<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args_for_update)
    }
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command and profile every file-system call it makes through libc
    #[command(after_long_help = run::HELP)]
    Run(Lazy<run::RunArgs>),
    /// Print a profile: ops ranked by total latency, with latency histograms
    #[command(after_long_help = report::HELP)]
    Report(Lazy<report::ReportArgs>),
    /// Verify a profile's counters (entered = returned = histogram total)
    Check(Lazy<check::CheckArgs>),
    /// Merge profiles of several processes, runs or hosts by adding buckets
    Merge(Lazy<merge::MergeArgs>),
    /// Profile syscall, file-system, FUSE and block latency in the kernel (eBPF)
    #[command(after_long_help = kernel::HELP)]
    Kernel(Lazy<kernel::KernelArgs>),
    /// Draw one op's histogram or timeline as SVG or PNG
    Plot(Lazy<plot::PlotArgs>),
    /// Write a profile as OpenTelemetry (OTLP JSON) or Prometheus metrics
    Export(Lazy<export::ExportArgs>),
    /// Compare two profiles op by op; exit 1 if an op changed significantly
    #[command(after_long_help = compare::HELP)]
    Compare(Lazy<compare::CompareArgs>),
    /// Measure this machine's characteristic latencies, used to label peaks
    Calibrate(Lazy<calibrate::CalibrateArgs>),
    /// Infer a file system's block size, read-ahead, page cache and direct blocks from latency
    Discover(Lazy<discover::DiscoverArgs>),
    /// Record every file-system call of a command into a trace (and its profile); `trace show` prints one
    Trace(Lazy<trace::TraceArgs>),
    /// Compile a trace into a replayable form (commands, resource slots, buffers, initial state)
    Compile(Lazy<compile::CompileArgs>),
    /// Replay a compiled trace under a root directory, timed and verified
    Replay(Lazy<replay::ReplayArgs>),
    /// Import a strace log or a fio iolog as a trace
    Import(Lazy<import::ImportArgs>),
    /// Mount a pass-through view of a directory that profiles every request (FUSE)
    Mount(Lazy<mount::MountArgs>),
    /// Print the live profile of an `fsprof mount` (optionally zeroing it)
    Stat(Lazy<mount::StatArgs>),
    /// Unmount an `fsprof mount` and wait until its profile is written
    Umount(Lazy<mount::UmountArgs>),
    /// File-system microbenchmarks with controlled cache state and confidence intervals
    Bench(Lazy<bench::BenchArgs>),
    /// Always-on, system-wide file-system latency by cgroup, for Prometheus and OpenTelemetry (eBPF)
    #[command(after_long_help = agent::HELP)]
    Agent(Lazy<agent::AgentArgs>),
    /// Read fsprof's metrics back from Prometheus into a profile (for report, compare, plot)
    #[command(after_long_help = pull::HELP)]
    Pull(Lazy<pull::PullArgs>),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    Completions(Lazy<completions::CompletionsArgs>),
    /// Print the man page, or write one per command with --dir
    Man(Lazy<completions::ManArgs>),
}

impl Command {
    /// Runs the subcommand; the result is the process exit status.
    pub fn dispatch(self) -> anyhow::Result<i32> {
        match self {
            Command::Run(a) => run::run(a.0),
            Command::Report(a) => report::report(a.0),
            Command::Check(a) => check::check(a.0),
            Command::Merge(a) => merge::merge(a.0),
            Command::Kernel(a) => kernel::kernel(a.0),
            Command::Plot(a) => plot::plot(a.0),
            Command::Export(a) => export::export(a.0),
            Command::Compare(a) => compare::compare(a.0),
            Command::Calibrate(a) => calibrate::calibrate(a.0),
            Command::Discover(a) => discover::discover(a.0),
            Command::Trace(a) => trace::trace(a.0),
            Command::Compile(a) => compile::compile(a.0),
            Command::Replay(a) => replay::replay(a.0),
            Command::Import(a) => import::import(a.0),
            Command::Mount(a) => mount::mount(a.0),
            Command::Stat(a) => mount::stat(a.0),
            Command::Umount(a) => mount::umount(a.0),
            Command::Bench(a) => bench::bench(a.0),
            Command::Agent(a) => agent::agent(a.0),
            Command::Pull(a) => pull::pull(a.0),
            Command::Completions(a) => completions::completions(a.0, Cli::command()),
            Command::Man(a) => completions::man(a.0, Cli::command()),
        }
    }
}

const EXIT_HELP: &str = "\
Exit status: `run` and `kernel -- CMD` pass on the command's (128+signal if a
signal ended it: 130 after Ctrl-C); `kernel` without a command exits 130 after
Ctrl-C, 0 after --duration. `compare` exits 1 when an op changed for the
slower (any change with --fail-on any), `check` 1 when it finds an
inconsistency. 2 on errors.";

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// A flattened group's doc comment would replace its command's
    /// description once the deferred arguments are built.
    #[test]
    fn argument_groups_leave_descriptions_alone() {
        let mut cmd = super::Cli::command();
        let before: Vec<_> = cmd
            .get_subcommands()
            .map(|s| {
                (
                    s.get_name().to_owned(),
                    s.get_about().map(|a| a.to_string()),
                )
            })
            .collect();
        cmd.build();
        let after: Vec<_> = cmd
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .map(|s| {
                (
                    s.get_name().to_owned(),
                    s.get_about().map(|a| a.to_string()),
                )
            })
            .collect();
        assert_eq!(before, after);
    }

    /// `cli` → `commands` → `args`, never back: the shared groups know no
    /// command, and no command knows the command list (completions and man
    /// pages are handed the built `Cli` instead).
    #[test]
    fn module_arrows_run_one_way() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
        let args = read(&src.join("args.rs"));
        for upward in ["crate::commands", "crate::cli"] {
            assert!(!args.contains(upward), "args.rs refers to {upward}");
        }
        let mut commands = 0;
        for entry in std::fs::read_dir(src.join("commands")).unwrap() {
            let path = entry.unwrap().path();
            let text = read(&path);
            assert!(
                !text.contains("crate::cli"),
                "{} refers to crate::cli",
                path.display()
            );
            commands += 1;
        }
        assert!(commands > 10, "commands/ read: {commands} files");
    }
}
