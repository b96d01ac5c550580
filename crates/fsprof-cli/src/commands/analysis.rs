//! Helpers the analysis commands share.

use anyhow::Result;
use fsprof_analysis::Calibration;

use crate::args::CalibrationArgs;

/// The calibration to label peaks with: the given file, else the default
/// file if `fsprof calibrate` wrote one, else none.
pub fn calibration(a: &CalibrationArgs) -> Result<Option<Calibration>> {
    if a.no_labels {
        return Ok(None);
    }
    Ok(Calibration::find(a.calibration.as_deref())?)
}
