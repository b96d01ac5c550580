//! `fsprof plot` and `report --format html` (crates/fsprof-plot): the
//! figures and pages from real profiles, and the pages in a real browser.

mod browser;
mod command;
mod png;
