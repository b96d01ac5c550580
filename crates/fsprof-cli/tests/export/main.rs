//! `fsprof export`, `run --serve-metrics` and fleet merges
//! (crates/fsprof-export): the exports checked by real parsers and a real
//! Prometheus, the live endpoint under hostile clients.

mod command;
mod fleet;
mod hostile_clients;
mod prometheus_server;
