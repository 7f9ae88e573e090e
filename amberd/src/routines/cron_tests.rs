//! Unit tests of `cron.rs`: parsing, the next fire time over a table of expressions, and the
//! daylight-saving edges in a zone the test defines (so no test depends on the machine's).

use super::*;

pub(crate) fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = (yoe + era * 400) as i32 + i32::from(m <= 2);
    (y, m, d)
}

pub(crate) fn naive_epoch(w: Wall) -> i64 {
    days_from_civil(w.year, w.month, w.day) * 86_400
        + i64::from(w.hour) * 3600
        + i64::from(w.minute) * 60
}

/// UTC, with one hour of summer time from `summer.0` to `summer.1` (instants), as the UK's
/// clocks go: 01:00 UTC forward to 02:00, back at 01:00 UTC (02:00 summer time).
pub(crate) struct Zone {
    summer: Option<(i64, i64)>,
}

impl Zone {
    pub(crate) fn utc() -> Zone {
        Zone { summer: None }
    }

    fn uk_2025() -> Zone {
        Zone {
            summer: Some((
                naive_epoch(w("2025-03-30T01:00")),
                naive_epoch(w("2025-10-26T01:00")),
            )),
        }
    }

    fn offset(&self, epoch: i64) -> i32 {
        match self.summer {
            Some((from, to)) if epoch >= from && epoch < to => 3600,
            _ => 0,
        }
    }
}

impl LocalTime for Zone {
    fn wall(&self, epoch: i64) -> Option<(Wall, i32)> {
        let offset = self.offset(epoch);
        let local = epoch + i64::from(offset);
        let (year, month, day) = civil_from_days(local.div_euclid(86_400));
        let secs = local.rem_euclid(86_400);
        let wall = Wall {
            year,
            month,
            day,
            hour: (secs / 3600) as u32,
            minute: (secs % 3600 / 60) as u32,
        };
        Some((wall, offset))
    }

    fn instants(&self, wall: Wall) -> Vec<i64> {
        let naive = naive_epoch(wall);
        let mut found: Vec<i64> = [naive - 3600, naive]
            .into_iter()
            .filter(|at| self.wall(*at).is_some_and(|(x, _)| x == wall))
            .collect();
        found.sort_unstable();
        found
    }
}

/// `2025-01-06T07:00` as a wall time.
pub(crate) fn w(text: &str) -> Wall {
    let (date, time) = text.split_once('T').unwrap();
    let d: Vec<u32> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let t: Vec<u32> = time.split(':').map(|p| p.parse().unwrap()).collect();
    Wall {
        year: d[0] as i32,
        month: d[1],
        day: d[2],
        hour: t[0],
        minute: t[1],
    }
}

#[test]
fn next_fire_times_follow_the_fields() {
    // (expression, after, the next fire times in order)
    let table: &[(&str, &str, &[&str])] = &[
        // Weekdays at 07:00: Friday's is followed by Monday's (2025-01-01 is a Wednesday).
        (
            "0 7 * * 1-5",
            "2025-01-03T07:00",
            &["2025-01-06T07:00", "2025-01-07T07:00"],
        ),
        ("0 7 * * mon-fri", "2025-01-04T12:00", &["2025-01-06T07:00"]),
        (
            "*/15 * * * *",
            "2025-01-01T10:07",
            &["2025-01-01T10:15", "2025-01-01T10:30", "2025-01-01T10:45"],
        ),
        (
            "5/20 * * * *",
            "2025-01-01T10:30",
            &["2025-01-01T10:45", "2025-01-01T11:05"],
        ),
        (
            "0 9-17/4 * * *",
            "2025-01-01T13:00",
            &["2025-01-01T17:00", "2025-01-02T09:00"],
        ),
        (
            "0,30 8,20 * * *",
            "2025-01-01T08:30",
            &["2025-01-01T20:00", "2025-01-01T20:30", "2025-01-02T08:00"],
        ),
        ("0 0 1 jan *", "2025-03-01T00:00", &["2026-01-01T00:00"]),
        ("@monthly", "2025-01-15T00:00", &["2025-02-01T00:00"]),
        ("@yearly", "2025-01-01T00:00", &["2026-01-01T00:00"]),
        ("@weekly", "2025-01-01T00:00", &["2025-01-05T00:00"]),
        ("@hourly", "2025-01-01T23:00", &["2025-01-02T00:00"]),
        // Only months with a 31st.
        (
            "0 0 31 * *",
            "2025-01-31T00:00",
            &["2025-03-31T00:00", "2025-05-31T00:00"],
        ),
        // A leap day: the next leap year.
        ("0 0 29 2 *", "2025-01-01T00:00", &["2028-02-29T00:00"]),
        // Weekday 7 and 0 are both Sunday.
        ("0 0 * * 7", "2025-01-01T00:00", &["2025-01-05T00:00"]),
        ("0 0 * * 0", "2025-01-01T00:00", &["2025-01-05T00:00"]),
        (
            "0 0 * * 5-7",
            "2025-01-01T00:00",
            &[
                "2025-01-03T00:00",
                "2025-01-04T00:00",
                "2025-01-05T00:00",
                "2025-01-10T00:00",
            ],
        ),
        (
            "0 0 * * SAT,sun",
            "2025-01-01T00:00",
            &["2025-01-04T00:00", "2025-01-05T00:00"],
        ),
        // Both day fields restricted: the 13th OR a Friday.
        (
            "0 12 13 * 5",
            "2025-01-01T00:00",
            &[
                "2025-01-03T12:00",
                "2025-01-10T12:00",
                "2025-01-13T12:00",
                "2025-01-17T12:00",
            ],
        ),
        // A day field starting with `*` makes it AND: odd days that are Mondays.
        (
            "0 0 */2 * mon",
            "2025-01-01T00:00",
            &["2025-01-13T00:00", "2025-01-27T00:00"],
        ),
        // Year end.
        (
            "59 23 31 12 *",
            "2025-12-31T23:58",
            &["2025-12-31T23:59", "2026-12-31T23:59"],
        ),
    ];
    let zone = Zone::utc();
    for (expr, after, want) in table {
        let cron = Cron::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let mut at = naive_epoch(w(after));
        for expected in *want {
            at = cron
                .next_after(at, &zone)
                .unwrap_or_else(|| panic!("{expr}: nothing after {at}"));
            assert_eq!(
                zone.wall(at).unwrap().0,
                w(expected),
                "{expr} after {after}"
            );
        }
    }
}

#[test]
fn a_fire_time_is_strictly_after_the_instant_given() {
    let zone = Zone::utc();
    let cron = Cron::parse("0 7 * * *").unwrap();
    let seven = naive_epoch(w("2025-01-06T07:00"));
    assert_eq!(cron.next_after(seven - 1, &zone), Some(seven));
    // Within the minute, seconds later: that minute's fire is past.
    assert_eq!(cron.next_after(seven, &zone), Some(seven + 86_400));
    assert_eq!(cron.next_after(seven + 30, &zone), Some(seven + 86_400));
}

#[test]
fn a_wall_time_that_does_not_exist_is_skipped_and_a_repeated_one_fires_once() {
    let zone = Zone::uk_2025();
    let cron = Cron::parse("30 1 * * *").unwrap();
    // Spring: 01:30 does not happen on 2025-03-30 (01:00 UTC becomes 02:00).
    let before = naive_epoch(w("2025-03-29T01:30"));
    let next = cron.next_after(before, &zone).unwrap();
    assert_eq!(zone.wall(next).unwrap().0, w("2025-03-31T01:30"));
    // 01:30 summer time is 00:30 UTC.
    assert_eq!(next, naive_epoch(w("2025-03-31T00:30")));

    // Autumn: 01:00-01:59 happens twice on 2025-10-26; the job fires at the first.
    let before = naive_epoch(w("2025-10-25T00:30"));
    let first = cron.next_after(before, &zone).unwrap();
    assert_eq!(
        first,
        naive_epoch(w("2025-10-26T00:30")),
        "01:30 summer time"
    );
    let second = cron.next_after(first, &zone).unwrap();
    assert_eq!(zone.wall(second).unwrap().0, w("2025-10-27T01:30"));
    assert_eq!(second, naive_epoch(w("2025-10-27T01:30")));

    // Every hour across the change: 00:00, 01:00 (summer), then 02:00 winter time.
    let hourly = Cron::parse("0 * * * *").unwrap();
    let mut at = naive_epoch(w("2025-10-25T22:30"));
    let mut seen = Vec::new();
    for _ in 0..3 {
        at = hourly.next_after(at, &zone).unwrap();
        seen.push(rfc3339(at, &zone));
    }
    assert_eq!(
        seen,
        [
            "2025-10-26T00:00:00+01:00",
            "2025-10-26T01:00:00+01:00",
            "2025-10-26T02:00:00+00:00"
        ]
    );
}

#[test]
fn bad_expressions_are_refused_naming_the_field() {
    for (expr, says) in [
        ("0 7 * *", "five fields"),
        ("0 7 * * * *", "five fields"),
        ("60 * * * *", "minute `60`: out of 0-59"),
        ("0 24 * * *", "hour `24`: out of 0-23"),
        ("0 0 0 * *", "day of month `0`: out of 1-31"),
        ("0 0 * 13 *", "month `13`: out of 1-12"),
        ("0 0 * * 8", "day of week `8`: out of 0-7"),
        ("0 0 * foo *", "month `foo`: not a number"),
        ("5-1 * * * *", "minute `5-1`: the range runs backwards"),
        ("*/0 * * * *", "the step is not a number above 0"),
        ("0 0 30 2 *", "never fires"),
        ("@reboot", "unknown shorthand"),
        ("", "five fields"),
    ] {
        let err = Cron::parse(expr).unwrap_err().to_string();
        assert!(err.contains(says), "{expr:?}: {err}");
    }
    // The 30th of February or any Monday: fires on Mondays.
    assert!(Cron::parse("0 0 30 2 1").is_ok());
}

#[test]
fn cron_becomes_systemd_on_calendar() {
    for (expr, want) in [
        ("0 7 * * 1-5", &["Mon..Fri *-*-* 07:00:00"][..]),
        ("*/15 * * * *", &["*-*-* *:00,15,30,45:00"]),
        ("* * * * *", &["*-*-* *:*:00"]),
        ("30 2 1 * *", &["*-*-01 02:30:00"]),
        ("0 0 * * 0", &["Sun *-*-* 00:00:00"]),
        ("0 0 * * 6,0", &["Sat,Sun *-*-* 00:00:00"]),
        ("0 0 * * 1,3,5", &["Mon,Wed,Fri *-*-* 00:00:00"]),
        (
            "0 9 * jan,jul mon-wed,fri",
            &["Mon..Wed,Fri *-01,07-* 09:00:00"],
        ),
        // The 13th OR a Friday: systemd ANDs a line's fields, so two lines.
        ("0 12 13 * 5", &["Fri *-*-* 12:00:00", "*-*-13 12:00:00"]),
        // AND: odd days that are Mondays, one line.
        (
            "0 0 */2 * mon",
            &["Mon *-*-01,03,05,07,09,11,13,15,17,19,21,23,25,27,29,31 00:00:00"],
        ),
        ("@daily", &["*-*-* 00:00:00"]),
    ] {
        let cron = Cron::parse(expr).unwrap();
        assert_eq!(cron.on_calendar(), want, "{expr}");
    }
}

#[test]
fn rfc3339_with_an_offset_reads_back_as_the_same_instant() {
    let zone = Zone::uk_2025();
    for at in [
        naive_epoch(w("2025-01-06T07:00")),
        naive_epoch(w("2025-07-01T12:34")) + 56,
        0,
    ] {
        let text = rfc3339(at, &zone);
        assert_eq!(parse_rfc3339(&text), Some(at), "{text}");
    }
    assert_eq!(
        rfc3339(naive_epoch(w("2025-07-01T06:00")), &zone),
        "2025-07-01T07:00:00+01:00"
    );
    assert_eq!(parse_rfc3339("1970-01-01T00:01:00Z"), Some(60));
    assert_eq!(parse_rfc3339("1970-01-01 01:00:00.5+01:00"), Some(0));
    assert_eq!(parse_rfc3339("1970-01-01T00:00-00:30"), Some(1800));
    for bad in [
        "",
        "2025-13-01T00:00Z",
        "2025-02-29T00:00Z",
        "2025-01-01",
        "2025-01-01T25:00Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn the_system_zone_round_trips_its_own_wall_times() {
    let zone = SystemTime;
    let now = 1_736_150_400; // 2025-01-06T08:00:00Z
    let (wall, _) = zone.wall(now).unwrap();
    assert!(zone.instants(wall).contains(&now));
    let cron = Cron::parse("* * * * *").unwrap();
    assert_eq!(cron.next_after(now, &zone), Some(now + 60));
    assert_eq!(parse_rfc3339(&rfc3339(now, &zone)), Some(now));
}
