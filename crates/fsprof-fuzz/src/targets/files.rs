//! Small text files fsprof reads: the calibration file (`fsprof
//! calibrate`'s, which labels peaks in every report and comparison) and
//! the mount table (`/proc/self/mountinfo`, whose mount points any user
//! who can mount chooses).

use fsprof_analysis::compare::{compare_profiles, CompareOptions};
use fsprof_analysis::Calibration;
use fsprof_report::ReportOptions;
use fsprof_sys::mountinfo;

use super::clean_error;
use crate::engine::Target;
use crate::seeds;

#[rustfmt::skip]
const CALIBRATION_TOKENS: &[&[u8]] = &[b"\"median_ns\": ", b"\"p10_ns\": ", b"\"p90_ns\": ", b"\"rounds\": [", b"\"size_bytes\": ", b"\"samples\": ", b"\"label\": \"", b"\"characteristics\": ["];

#[rustfmt::skip]
pub const CALIBRATION: Target = Target::new("calibration", seeds::calibration_files, CALIBRATION_TOKENS, check_calibration, 300);

fn mountinfo_seeds() -> Vec<Vec<u8>> {
    {
        vec![b"36 35 98:0 /mnt1 /mnt/my\\040dir ro,noatime master:1 - fuse.fsprof fsprof rw,user_id=0\n\
               61 1 0:52 / /proc rw - proc proc rw\n\
               22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
            .to_vec()]
    }
}

const MOUNTINFO_TOKENS: &[&[u8]] = &[b" - ", b"\\040", b"\\134", b"\\", b":", b" shared:1", b"\n"];

#[rustfmt::skip]
pub const MOUNTINFO: Target = Target::new("mountinfo", mountinfo_seeds, MOUNTINFO_TOKENS, check_mountinfo, 3000);

pub fn check_calibration(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let cal = match Calibration::from_json(&text) {
        Ok(c) => c,
        Err(e) => return clean_error(&e),
    };
    let _ = fsprof_report::calibration::render_text(&cal);
    let profile = fsprof_testkit::samples::user_profile();
    // The tables that label peaks.
    let labelled = super::profile::extras(false)
        .into_iter()
        .filter(|x| x.peaks || x.interesting);
    for extras in labelled {
        let opts = ReportOptions {
            extras,
            ..Default::default()
        };
        if let Err(e) = fsprof_report::render(&profile, &opts, Some(&cal)) {
            clean_error(&e);
        }
    }
    let mut other = profile.clone();
    other.layers[0].ops.swap(0, 1);
    let opts = CompareOptions {
        calibration: Some(cal),
        ..Default::default()
    };
    let c = compare_profiles(&profile, &other, &opts);
    let _ = fsprof_report::analysis::comparison_text(&c, "a", "b");
}

pub fn check_mountinfo(bytes: &[u8]) {
    for m in mountinfo::parse(&String::from_utf8_lossy(bytes)) {
        let _ = m.read_only();
    }
}
