# Shared by the bench scripts (sourced, after `cd` to the repository root).

# The fsprof binary to measure: $FSPROF when set (an existing build), else
# a release build of this checkout, made now.
fsprof_binary() {
  if [ -n "${FSPROF:-}" ]; then
    echo "$FSPROF"
  else
    cargo build --release -q -p fsprof >&2
    echo target/release/fsprof
  fi
}
