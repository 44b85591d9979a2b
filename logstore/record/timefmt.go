package record

// Calendar helpers shared by the JSON decoder and encoder. Dates are
// proleptic Gregorian, counted in days since 1970-01-01 (Arrow DATE32).

const (
	secondsPerDay = 86400
	nanosPerSec   = 1_000_000_000
	// minDay/maxDay bound what the JSON decoder accepts: 0000-01-01 ..
	// 9999-12-31, so that every accepted value prints as a 4-digit year.
	minDay = -719528
	maxDay = 2932896
)

// daysFromCivil converts a date to days since the epoch (Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays converts days since the epoch to a date.
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z
	if era < 0 {
		era -= 146096
	}
	era /= 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func daysInMonth(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// floorDiv returns floor(a/b) and the non-negative remainder (b > 0).
func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// pow10 holds 10^0 .. 10^18.
var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// digits parses exactly n ASCII digits at s[i:]; ok is false otherwise.
func digits(s []byte, i, n int) (v int64, ok bool) {
	if i < 0 || i+n > len(s) {
		return 0, false
	}
	for _, c := range s[i : i+n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// parseDate parses "YYYY-MM-DD" at the start of s and returns days since
// the epoch; ok is false on any syntax or calendar error.
func parseDate(s []byte) (days int64, ok bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := digits(s, 0, 4)
	m, ok2 := digits(s, 5, 2)
	d, ok3 := digits(s, 8, 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysInMonth(y, m) {
		return 0, false
	}
	return daysFromCivil(y, m, d), true
}

// parseClock parses "HH:MM[:SS[.f{1,9}]]" at the start of s. It returns
// nanoseconds of the day, the number of bytes used, and the number of
// fraction digits given. requireSeconds makes ":SS" mandatory.
func parseClock(s []byte, requireSeconds bool) (nanos int64, n int, ok bool) {
	if len(s) < 5 || s[2] != ':' {
		return 0, 0, false
	}
	h, ok1 := digits(s, 0, 2)
	mi, ok2 := digits(s, 3, 2)
	if !ok1 || !ok2 || h > 23 || mi > 59 {
		return 0, 0, false
	}
	sec := int64(0)
	n = 5
	if len(s) > 5 && s[5] == ':' {
		v, ok3 := digits(s, 6, 2)
		if !ok3 || v > 59 {
			return 0, 0, false
		}
		sec = v
		n = 8
	} else if requireSeconds {
		return 0, 0, false
	}
	nanos = (h*3600 + mi*60 + sec) * nanosPerSec
	if n == 8 && len(s) > 8 && s[8] == '.' {
		i := 9
		frac := int64(0)
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if i-9 >= 9 {
				return 0, 0, false
			}
			frac = frac*10 + int64(s[i]-'0')
			i++
		}
		if i == 9 {
			return 0, 0, false
		}
		nanos += frac * pow10[9-(i-9)]
		n = i
	}
	return nanos, n, true
}

// appendDate appends "YYYY-MM-DD" (a '-' and more digits outside 0..9999).
func appendDate(dst []byte, days int64) []byte {
	y, m, d := civilFromDays(days)
	if y < 0 {
		dst = append(dst, '-')
		y = -y
	}
	dst = appendPadded(dst, y, 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, m, 2)
	dst = append(dst, '-')
	return appendPadded(dst, d, 2)
}

// appendClock appends "HH:MM:SS" plus exactly prec fraction digits.
func appendClock(dst []byte, nanosOfDay int64, prec int) []byte {
	sec := nanosOfDay / nanosPerSec
	frac := nanosOfDay % nanosPerSec
	dst = appendPadded(dst, sec/3600, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, sec/60%60, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, sec%60, 2)
	if prec > 0 {
		dst = append(dst, '.')
		dst = appendPadded(dst, frac/pow10[9-prec], prec)
	}
	return dst
}

// appendPadded appends v (>= 0) with at least width digits.
func appendPadded(dst []byte, v int64, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for v >= 10 || width > 1 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	i--
	buf[i] = byte('0' + v)
	return append(dst, buf[i:]...)
}
