//! Writes every target's seeds and corpus files as cargo-fuzz's starting
//! corpus: `cargo run -p fsprof-fuzz --example corpus DIR` makes
//! `DIR/<target>/<n>` for each.

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "fuzz/corpus".into());
    for t in fsprof_fuzz::targets::all() {
        let out = dir.join(t.name);
        std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        let mut inputs = (t.seeds)();
        for e in std::fs::read_dir(fsprof_fuzz::engine::corpus_dir(t.name))
            .into_iter()
            .flatten()
            .flatten()
        {
            inputs.push(std::fs::read(e.path()).expect("a corpus file"));
        }
        for (k, b) in inputs.iter().enumerate() {
            std::fs::write(out.join(format!("seed-{k}")), b).expect("writing a seed");
        }
        println!("{}: {} inputs", out.display(), inputs.len());
    }
}
