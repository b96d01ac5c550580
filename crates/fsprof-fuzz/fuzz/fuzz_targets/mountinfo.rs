#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| fsprof_fuzz::targets::files::check_mountinfo(data));
