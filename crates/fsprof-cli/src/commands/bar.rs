//! The CLI's one progress bar (indicatif, on stderr, drawn only when that
//! is a terminal) for work counted in steps: bench runs, discovery phases,
//! replayed commands. Each command gives its own line template.

use fsprof_capture::Steps;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    template: &'static str,
    bar: Option<ProgressBar>,
    hidden: bool,
}

impl Bar {
    /// `template` in indicatif's syntax; `{msg}` is the phase's name.
    pub fn new(template: &'static str) -> Bar {
        Bar {
            template,
            bar: None,
            hidden: false,
        }
    }

    /// A bar that draws nothing (`--quiet`).
    pub fn hidden(mut self, hidden: bool) -> Bar {
        self.hidden = hidden;
        self
    }

    /// Moves to step `pos` of the phase.
    pub fn to(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }
}

impl Steps for Bar {
    fn phase(&mut self, what: &str, steps: u64) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if self.hidden {
            return;
        }
        let b = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template(self.template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_message(what.to_string());
        self.bar = Some(b);
    }

    fn advance(&mut self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    fn note(&mut self, line: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| fsprof_sys::diag!("{line}")),
            None => fsprof_sys::diag!("{line}"),
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
