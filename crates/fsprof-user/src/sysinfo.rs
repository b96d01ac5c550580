//! Host facts recorded in every profile.

fn uname_field(pick: fn(&libc::utsname) -> &[libc::c_char]) -> String {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let bytes: Vec<u8> = pick(&u)
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn hostname() -> String {
    uname_field(|u| &u.nodename)
}

pub fn kernel_release() -> String {
    uname_field(|u| &u.release)
}
