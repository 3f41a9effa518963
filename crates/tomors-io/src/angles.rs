//! What can be a scan: checks of projection angles (radians) read from a
//! file or made from a range, and the unit guess for angles stored without
//! one.
//!
//! Errors: a non-finite angle; all angles equal (zero span); a span over
//! two turns (4π); with angles given in radians, a value beyond one turn
//! (2π), which is what degrees read as radians look like. Warning: a span of
//! less than a half-turn (a limited-angle scan).

use crate::source::AngleUnit;

/// Tolerance of the turn limits (radians): endpoints given inclusively and
/// float rounding stay inside.
const EPS: f64 = 1e-3;

/// Checks angles in radians that were given in `unit`; `Err` holds the one
/// line that says what is wrong (the caller names the file or flag).
pub fn check_angles(angles: &[f32], unit: AngleUnit) -> Result<(), String> {
    use std::f64::consts::PI;
    if let Some((i, v)) = angles.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(format!("angle {i} is {v}, not a number"));
    }
    let n = angles.len();
    if n == 0 {
        return Err("no angles".into());
    }
    let (lo, hi) = angles
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &a| {
            (l.min(a as f64), h.max(a as f64))
        });
    let span = hi - lo;
    let deg_hint = "; if the values are degrees, use --angles-unit deg";
    if n >= 2 && span < 1e-7 {
        return Err(format!("all {n} angles are equal ({lo} rad): not a scan"));
    }
    if span > 4.0 * PI + EPS {
        return Err(match unit {
            AngleUnit::Radians => format!(
                "the angles span {span:.4} rad ({:.1} turns), more than two turns: not a scan in radians{deg_hint}",
                span / (2.0 * PI)
            ),
            AngleUnit::Degrees => format!(
                "the angles span {:.1}°, more than two turns (720°): not a scan",
                span.to_degrees()
            ),
        });
    }
    let max_abs = lo.abs().max(hi.abs());
    if unit == AngleUnit::Radians && max_abs > 2.0 * PI + EPS {
        return Err(format!(
            "angles reach {max_abs:.4} rad, beyond one turn (2π){deg_hint}"
        ));
    }
    Ok(())
}

/// A warning for a scan of less than a half-turn (span plus one step below
/// 180°), whose reconstruction has limited-angle streaks; `None` otherwise.
pub fn limited_angle_warning(angles: &[f32]) -> Option<String> {
    use std::f64::consts::PI;
    let n = angles.len();
    if n < 2 {
        return None;
    }
    let (lo, hi) = angles
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &a| {
            (l.min(a as f64), h.max(a as f64))
        });
    let span = hi - lo;
    let step = span / (n - 1) as f64;
    (span + step < PI - EPS).then(|| {
        format!(
            "the angles cover only {:.1}° (less than 180°): a limited-angle scan, expect streaks",
            (span + step).to_degrees()
        )
    })
}

/// The unit of stored angles that carry none: radians when every value lies
/// within one turn (|v| ≤ 2π), degrees otherwise (the DXchange convention;
/// such values cannot be a scan in radians anyway). The first guess is
/// doubtful — a scan of a few degrees would look the same — so it comes
/// with a warning that says how to override it (`--angles-unit`); the
/// second comes with none.
pub fn guess_unit(values: &[f64], what: &str) -> (AngleUnit, Option<String>) {
    let max_abs = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &a| {
            (l.min(a), h.max(a))
        });
    if max_abs <= 2.0 * std::f64::consts::PI + EPS {
        (
            AngleUnit::Radians,
            Some(format!(
                "{what} has no units attribute; its values {lo:.4}…{hi:.4} are read as radians \
                 (in degrees they would be a scan of a few degrees); if they are degrees, use --angles-unit deg"
            )),
        )
    } else {
        (AngleUnit::Degrees, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f32::consts::PI;

    fn uniform(n: usize, range: f32) -> Vec<f32> {
        (0..n).map(|i| i as f32 * range / n as f32).collect()
    }

    #[test]
    fn scans_pass() {
        assert!(check_angles(&uniform(180, PI), AngleUnit::Radians).is_ok());
        assert!(check_angles(&uniform(360, 2.0 * PI), AngleUnit::Radians).is_ok());
        // 0…2π inclusive.
        let mut a = uniform(360, 2.0 * PI);
        a.push(2.0 * PI);
        assert!(check_angles(&a, AngleUnit::Radians).is_ok());
        assert!(check_angles(&[0.3], AngleUnit::Radians).is_ok());
        // A 720° scan given in degrees.
        assert!(check_angles(&uniform(720, 4.0 * PI), AngleUnit::Degrees).is_ok());
    }

    #[test]
    fn non_scans_fail() {
        let deg_as_rad: Vec<f32> = (0..90).map(|i| i as f32 * 2.0).collect();
        let e = check_angles(&deg_as_rad, AngleUnit::Radians).unwrap_err();
        assert!(e.contains("--angles-unit deg"), "{e}");
        let e = check_angles(&[1.0; 10], AngleUnit::Radians).unwrap_err();
        assert!(e.contains("equal"), "{e}");
        let e = check_angles(&[0.0, f32::NAN], AngleUnit::Radians).unwrap_err();
        assert!(e.contains("NaN"), "{e}");
        let huge: Vec<f32> = uniform(10, PI).iter().map(|a| a * 1e30).collect();
        assert!(check_angles(&huge, AngleUnit::Radians).is_err());
        assert!(check_angles(&uniform(10, 1e9f32.to_radians()), AngleUnit::Degrees).is_err());
        // Beyond one turn in radians, within two: degrees 0…10 read as radians.
        let e = check_angles(&uniform(10, 10.0), AngleUnit::Radians).unwrap_err();
        assert!(e.contains("beyond one turn"), "{e}");
    }

    #[test]
    fn limited_angle_warns() {
        assert!(limited_angle_warning(&uniform(90, PI)).is_none());
        assert!(limited_angle_warning(&uniform(90, PI / 2.0)).is_some());
    }

    #[test]
    fn unit_guess() {
        let rad: Vec<f64> = (0..180)
            .map(|i| i as f64 * std::f64::consts::PI / 180.0)
            .collect();
        assert_eq!(guess_unit(&rad, "theta").0, AngleUnit::Radians);
        let (u, w) = guess_unit(&rad, "theta");
        assert_eq!(u, AngleUnit::Radians);
        assert!(w.unwrap().contains("--angles-unit deg"));
        let deg: Vec<f64> = (0..180).map(|i| i as f64).collect();
        let (u, w) = guess_unit(&deg, "theta");
        assert_eq!(u, AngleUnit::Degrees);
        assert!(w.is_none());
    }
}
