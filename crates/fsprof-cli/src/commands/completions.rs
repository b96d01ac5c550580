//! `fsprof completions SHELL` and `fsprof man [--dir DIR]`: shell
//! completions (clap_complete) and man pages (clap_mangen) generated from
//! the same clap definitions as `--help`, so they cannot drift from it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use clap_complete::Shell;

#[derive(Debug, Args)]
#[command(
    after_help = "Install, e.g. for bash: fsprof completions bash > ~/.local/share/bash-completion/completions/fsprof\n\
    zsh: fsprof completions zsh > \"${fpath[1]}/_fsprof\"; fish: fsprof completions fish > ~/.config/fish/completions/fsprof.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
#[command(after_help = "Read it with: fsprof man | man -l -\n\
    Install: fsprof man --dir /usr/local/share/man/man1")]
pub struct ManArgs {
    /// Write fsprof.1 and one fsprof-<command>.1 per command into DIR
    /// [default: print fsprof.1 to standard output]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `cli` is the whole command line, as `Cli::command()` builds it.
pub fn completions(a: CompletionsArgs, cli: clap::Command) -> Result<i32> {
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut for_completion(cli), "fsprof", &mut out);
    crate::files::write_stdout(&out)?;
    Ok(0)
}

/// `cmd` as completions should offer it. clap_complete offers hidden
/// arguments too (it leaves out only hidden values), and ours are test
/// hooks (`kernel --require-tracepoint`), so a subcommand that has any is
/// rebuilt without them: its name, about, binary name and visible
/// arguments (which carry their groups) are all a completion reads. It
/// moves to the end of the command list, which shells sort anyway.
fn for_completion(mut cmd: clap::Command) -> clap::Command {
    cmd.build();
    let hiding: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| s.get_arguments().any(clap::Arg::is_hide_set))
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in hiding {
        cmd = cmd.mut_subcommand(&name, |s| {
            // The built arguments include `--help` already.
            let mut visible = clap::Command::new(s.get_name().to_owned())
                .disable_help_flag(true)
                .args(s.get_arguments().filter(|a| !a.is_hide_set()).cloned());
            if let Some(about) = s.get_about() {
                visible = visible.about(about.clone());
            }
            if let Some(bin) = s.get_bin_name() {
                visible = visible.bin_name(bin.to_owned());
            }
            visible.build();
            visible
        });
    }
    cmd
}

pub fn man(a: ManArgs, cmd: clap::Command) -> Result<i32> {
    match a.dir {
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            crate::files::write_stdout(&out)?;
        }
        Some(dir) => {
            let mut cmd = cmd.disable_help_subcommand(true);
            cmd.build();
            write_pages(cmd, &dir)
                .with_context(|| format!("writing man pages to {}", dir.display()))?;
            fsprof_sys::diag!("fsprof: man pages written to {}", dir.display());
        }
    }
    Ok(0)
}

/// `clap_mangen::generate_to`, written by fsprof's output writer: an
/// installed page is replaced (as an install does), a symbolic link by
/// that name too, never the file it points to.
fn write_pages(cmd: clap::Command, dir: &std::path::Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_pages(sub, dir)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let mut page = Vec::new();
    man.render(&mut page)?;
    fsprof_core::output::write_atomic(&dir.join(man.get_filename()), &page, true)?;
    Ok(())
}
