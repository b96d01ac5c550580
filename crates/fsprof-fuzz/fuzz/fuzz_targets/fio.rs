#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| fsprof_fuzz::targets::imports::check_fio(data));
