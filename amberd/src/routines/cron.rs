//! Cron expressions: five fields (minute, hour, day of month, month, day of week), each `*`,
//! a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n`, or a comma list of those; month
//! and weekday names (`jan`, `mon`); weekday 0 and 7 both Sunday. When both day fields are
//! restricted (neither starts with `*`), a day matches either (cron's OR rule); otherwise
//! both must. `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`, `@yearly`
//! (`@annually`) stand for their usual expressions.
//!
//! Fire times are wall-clock minutes in the daemon's local time ([`LocalTime`]): the search
//! walks the calendar itself, and only a matching minute is turned into an instant. A wall
//! time that does not exist (clocks go forward over it) does not fire; one that happens
//! twice (clocks go back) fires once, at its first instant after the given one.

use std::fmt;

/// Why a cron expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error(
        "`{0}`: a cron expression has five fields (minute hour day-of-month month day-of-week)"
    )]
    FieldCount(String),
    #[error("{field} `{item}`: {why}")]
    Field {
        field: &'static str,
        item: String,
        why: String,
    },
    #[error("`{0}` never fires (no month has that day)")]
    Never(String),
    #[error("`{0}`: unknown shorthand (expected @hourly, @daily, @weekly, @monthly or @yearly)")]
    Shorthand(String),
}

/// A wall-clock minute in some time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Wall {
    pub year: i32,
    /// 1-12.
    pub month: u32,
    /// 1-31.
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
}

impl Wall {
    /// Day of the week, 0 = Sunday.
    pub fn weekday(&self) -> u32 {
        weekday(self.year, self.month, self.day)
    }

    /// The next minute, carrying into hours, days, months and years.
    fn next_minute(self) -> Wall {
        if self.minute < 59 {
            return Wall {
                minute: self.minute + 1,
                ..self
            };
        }
        self.next_hour()
    }

    fn next_hour(self) -> Wall {
        if self.hour < 23 {
            return Wall {
                hour: self.hour + 1,
                minute: 0,
                ..self
            };
        }
        self.next_day()
    }

    fn next_day(self) -> Wall {
        if self.day < days_in_month(self.year, self.month) {
            return Wall {
                day: self.day + 1,
                hour: 0,
                minute: 0,
                ..self
            };
        }
        self.next_month()
    }

    fn next_month(self) -> Wall {
        let (year, month) = if self.month == 12 {
            (self.year + 1, 1)
        } else {
            (self.year, self.month + 1)
        };
        Wall {
            year,
            month,
            day: 1,
            hour: 0,
            minute: 0,
        }
    }
}

impl fmt::Display for Wall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute
        )
    }
}

fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Sakamoto's method: 0 = Sunday.
fn weekday(year: i32, month: u32, day: u32) -> u32 {
    const T: [i32; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    let y = if month < 3 { year - 1 } else { year };
    let m = T[(month as usize - 1) % 12];
    let w = (y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400) + m + day as i32)
        .rem_euclid(7);
    w as u32
}

/// How the daemon's local time maps to instants (seconds since the Unix epoch).
pub trait LocalTime {
    /// The wall-clock minute (seconds dropped) of `epoch`, and the zone's offset from UTC
    /// then, in seconds.
    fn wall(&self, epoch: i64) -> Option<(Wall, i32)>;
    /// Every instant whose wall-clock minute is `wall`, in order: none in a gap, two in a
    /// repeated hour.
    fn instants(&self, wall: Wall) -> Vec<i64>;
}

/// Bits of the values a field allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Set(u64);

impl Set {
    fn has(self, v: u32) -> bool {
        v < 64 && self.0 & (1 << v) != 0
    }

    fn values(self, lo: u32, hi: u32) -> Vec<u32> {
        (lo..=hi).filter(|v| self.has(*v)).collect()
    }
}

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    text: String,
    minutes: Set,
    hours: Set,
    doms: Set,
    months: Set,
    dows: Set,
    dom_star: bool,
    dow_star: bool,
}

/// How far [`Cron::next_wall`] looks: past a leap day in a century year that is not one.
const SEARCH_YEARS: i32 = 30;

struct FieldSpec {
    name: &'static str,
    lo: u32,
    hi: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    lo: 0,
    hi: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    lo: 0,
    hi: 23,
    names: &[],
};
const DOM: FieldSpec = FieldSpec {
    name: "day of month",
    lo: 1,
    hi: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    lo: 1,
    hi: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
// 7 is Sunday too; folded into 0 after parsing.
const DOW: FieldSpec = FieldSpec {
    name: "day of week",
    lo: 0,
    hi: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl FieldSpec {
    fn value(&self, item: &str, text: &str) -> Result<u32, CronError> {
        let lower = text.to_ascii_lowercase();
        if let Some(i) = self.names.iter().position(|n| *n == lower) {
            // Months count from 1, weekdays from 0.
            return Ok(i as u32 + if self.name == MONTH.name { 1 } else { 0 });
        }
        let v: u32 = text.parse().map_err(|_| self.error(item, "not a number"))?;
        if v < self.lo || v > self.hi {
            return Err(self.error(item, &format!("out of {}-{}", self.lo, self.hi)));
        }
        Ok(v)
    }

    fn error(&self, item: &str, why: &str) -> CronError {
        CronError::Field {
            field: self.name,
            item: item.to_owned(),
            why: why.to_owned(),
        }
    }

    /// One field: a comma list of `*`, `v`, `a-b`, each with an optional `/step`.
    fn parse(&self, field: &str) -> Result<Set, CronError> {
        let mut bits = 0u64;
        for item in field.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => {
                    let step: u32 = step
                        .parse()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| self.error(item, "the step is not a number above 0"))?;
                    (range, Some(step))
                }
                None => (item, None),
            };
            let (lo, hi) = if range == "*" {
                (self.lo, self.hi)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(item, a)?, self.value(item, b)?);
                if a > b {
                    return Err(self.error(item, "the range runs backwards"));
                }
                (a, b)
            } else {
                let a = self.value(item, range)?;
                // `a/n` is `a-max/n`, as in Vixie cron.
                (a, if step.is_some() { self.hi } else { a })
            };
            let step = step.unwrap_or(1);
            let mut v = lo;
            while v <= hi {
                bits |= 1 << v;
                v += step;
            }
        }
        Ok(Set(bits))
    }
}

impl Cron {
    pub fn parse(text: &str) -> Result<Cron, CronError> {
        let trimmed = text.trim();
        let expanded = match trimmed {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            other if other.starts_with('@') => {
                return Err(CronError::Shorthand(other.to_owned()));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(CronError::FieldCount(trimmed.to_owned()));
        };
        let mut dows = DOW.parse(dow)?;
        if dows.has(7) {
            dows = Set((dows.0 & !(1 << 7)) | 1);
        }
        let cron = Cron {
            text: trimmed.to_owned(),
            minutes: MINUTE.parse(minute)?,
            hours: HOUR.parse(hour)?,
            doms: DOM.parse(dom)?,
            months: MONTH.parse(month)?,
            dows,
            dom_star: dom.starts_with('*'),
            dow_star: dow.starts_with('*'),
        };
        // Only the day of month can rule out every day (`0 0 30 2 *`); when the day fields
        // OR, any matching weekday fires.
        if (cron.dom_star || cron.dow_star) && !cron.some_month_has_a_day() {
            return Err(CronError::Never(cron.text));
        }
        Ok(cron)
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn some_month_has_a_day(&self) -> bool {
        (1..=12).any(|m| {
            // February's 29th exists in leap years.
            let longest = if m == 2 { 29 } else { days_in_month(2001, m) };
            self.months.has(m) && (1..=longest).any(|d| self.doms.has(d))
        })
    }

    fn day_matches(&self, w: Wall) -> bool {
        let dom = self.doms.has(w.day);
        let dow = self.dows.has(w.weekday());
        // Vixie cron's rule: a field starting with `*` (`*/2` too) makes it AND.
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first matching wall-clock minute after `after`.
    pub fn next_wall(&self, after: Wall) -> Option<Wall> {
        let mut w = after.next_minute();
        while w.year <= after.year + SEARCH_YEARS {
            if !self.months.has(w.month) {
                w = w.next_month();
            } else if !self.day_matches(w) {
                w = w.next_day();
            } else if !self.hours.has(w.hour) {
                w = w.next_hour();
            } else if !self.minutes.has(w.minute) {
                w = w.next_minute();
            } else {
                return Some(w);
            }
        }
        None
    }

    /// The first fire time after the instant `after` (seconds since the epoch), in the
    /// local time `tz`.
    pub fn next_after(&self, after: i64, tz: &dyn LocalTime) -> Option<i64> {
        let (mut wall, _) = tz.wall(after)?;
        // A bound on the wall times that do not exist or already passed (a gap, a repeated
        // hour): a few per year at most.
        for _ in 0..1000 {
            wall = self.next_wall(wall)?;
            if let Some(at) = tz.instants(wall).into_iter().find(|at| *at > after) {
                return Some(at);
            }
        }
        None
    }

    /// systemd `OnCalendar=` values that elapse at every fire time (in the same local time):
    /// one line, or two when both day fields are restricted (systemd ANDs them; cron ORs).
    pub fn on_calendar(&self) -> Vec<String> {
        let time = format!(
            "{}:{}:00",
            calendar_list(self.hours, 0, 23),
            calendar_list(self.minutes, 0, 59)
        );
        let months = calendar_list(self.months, 1, 12);
        let doms = calendar_list(self.doms, 1, 31);
        let line = |dow: bool, dom: bool| {
            let date = format!("*-{}-{}", months, if dom { doms.as_str() } else { "*" });
            match dow.then(|| weekday_list(self.dows)).flatten() {
                Some(days) => format!("{days} {date} {time}"),
                None => format!("{date} {time}"),
            }
        };
        if self.dom_star || self.dow_star {
            vec![line(true, true)]
        } else {
            vec![line(true, false), line(false, true)]
        }
    }
}

/// `*` for every value, else the values as a comma list of two digits each.
fn calendar_list(set: Set, lo: u32, hi: u32) -> String {
    let values = set.values(lo, hi);
    if values.len() == (hi - lo + 1) as usize {
        return "*".to_owned();
    }
    values
        .iter()
        .map(|v| format!("{v:02}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// systemd's weekday list (`Mon..Fri`, `Sat,Sun`), Monday first; `None` for every day.
fn weekday_list(set: Set) -> Option<String> {
    const NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    // Monday = 0 here; cron's Sunday (0) is the last.
    let days: Vec<usize> = (0..7)
        .filter(|i| set.has(if *i == 6 { 0 } else { *i as u32 + 1 }))
        .collect();
    if days.len() == 7 {
        return None;
    }
    let mut parts = Vec::new();
    let mut i = 0;
    while i < days.len() {
        let mut j = i;
        while j + 1 < days.len() && days[j + 1] == days[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => NAMES[days[i]].to_owned(),
            1 => format!("{},{}", NAMES[days[i]], NAMES[days[j]]),
            _ => format!("{}..{}", NAMES[days[i]], NAMES[days[j]]),
        });
        i = j + 1;
    }
    Some(parts.join(","))
}

/// The system's local time, through libc (`localtime_r`, `mktime`, which read the zone of
/// `TZ` or `/etc/localtime` themselves): as every program of the machine sees it.
pub struct SystemTime;

impl LocalTime for SystemTime {
    fn wall(&self, epoch: i64) -> Option<(Wall, i32)> {
        let t = libc::time_t::try_from(epoch).ok()?;
        // SAFETY: an all-zero `tm` is a valid value of the plain C struct.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live locals; localtime_r is reentrant.
        if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
            return None;
        }
        let wall = Wall {
            year: tm.tm_year + 1900,
            month: u32::try_from(tm.tm_mon + 1).ok()?,
            day: u32::try_from(tm.tm_mday).ok()?,
            hour: u32::try_from(tm.tm_hour).ok()?,
            minute: u32::try_from(tm.tm_min).ok()?,
        };
        Some((wall, i32::try_from(tm.tm_gmtoff).unwrap_or(0)))
    }

    fn instants(&self, wall: Wall) -> Vec<i64> {
        let mut found = Vec::new();
        // Asked once as standard time and once as summer time: the answers that read back
        // as `wall` are its instants.
        for isdst in [0, 1] {
            // SAFETY: as above.
            let mut tm: libc::tm = unsafe { std::mem::zeroed() };
            tm.tm_year = wall.year - 1900;
            tm.tm_mon = wall.month as i32 - 1;
            tm.tm_mday = wall.day as i32;
            tm.tm_hour = wall.hour as i32;
            tm.tm_min = wall.minute as i32;
            tm.tm_isdst = isdst;
            // SAFETY: a pointer to a live local; mktime only normalises it.
            let at = unsafe { libc::mktime(&mut tm) };
            // `time_t` is 32 bits on some targets.
            #[allow(clippy::useless_conversion)]
            let at = i64::from(at);
            if at != -1 && self.wall(at).is_some_and(|(w, _)| w == wall) {
                found.push(at);
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}

/// RFC 3339 of `epoch` in local time `tz`, with its offset (`2025-01-06T07:00:00+01:00`).
pub fn rfc3339(epoch: i64, tz: &dyn LocalTime) -> String {
    let Some((wall, offset)) = tz.wall(epoch) else {
        return humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch.max(0).unsigned_abs()),
        )
        .to_string();
    };
    let sign = if offset < 0 { '-' } else { '+' };
    let offset = offset.unsigned_abs();
    format!(
        "{wall}:{:02}{sign}{:02}:{:02}",
        epoch.rem_euclid(60),
        offset / 3600,
        offset % 3600 / 60
    )
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
pub(crate) fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let y = i64::from(if month <= 2 { year - 1 } else { year });
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2025-01-06T07:00:00+01:00` (or `Z`, or a space for the `T`; seconds and their
/// fraction optional) as seconds since the epoch.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let year: i32 = d.next()?.parse().ok()?;
    let month: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':')?;
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        (clock, sign * (h * 3600 + m * 60))
    };
    let mut c = clock.splitn(3, ':');
    let hour: i64 = c.next()?.parse().ok()?;
    let minute: i64 = c.next()?.parse().ok()?;
    let second: i64 = match c.next() {
        Some(s) => s.split('.').next()?.parse().ok()?,
        None => 0,
    };
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
#[path = "cron_tests.rs"]
pub(crate) mod tests;
