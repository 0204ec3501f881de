package trace

import "testing"

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		in     string
		want   decimal
		wantOK bool
	}{
		{"0", decimal{}, true},
		{"-0.000", decimal{neg: true}, true},
		{"12", decimal{digits: "12"}, true},
		{"1200", decimal{digits: "12", exp: 2}, true},
		{"0.0015", decimal{digits: "15", exp: -4}, true},
		{"1.50e3", decimal{digits: "15", exp: 2}, true},
		{"-7E-2", decimal{neg: true, digits: "7", exp: -2}, true},
		{"1e999999999999999999", decimal{digits: "1", exp: maxExp}, true},
		{"", decimal{}, false},
		{"01", decimal{}, false},
		{"1.", decimal{}, false},
		{".5", decimal{}, false},
		{"1e", decimal{}, false},
		{"+1", decimal{}, false},
		{"0x10", decimal{}, false},
		{"1 ", decimal{}, false},
		{"NaN", decimal{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseDecimal(tt.in)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("parseDecimal(%q) = %+v, %v, want %+v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestDecimalRound(t *testing.T) {
	tests := []struct {
		in        string
		shift     int
		wantMag   uint64
		wantExact bool
		wantOK    bool
	}{
		{"0", 6, 0, true, true},
		{"42", 0, 42, true, true},
		{"42", 6, 42_000_000, true, true},
		{"1.5", 6, 1_500_000, true, true},
		{"0.0000015", 6, 2, false, true},
		{"0.0000014", 6, 1, false, true},
		{"2.5", 0, 3, false, true},
		{"0.5", 0, 1, false, true},
		{"0.05", 0, 0, false, true},
		{"1e-30", 0, 0, false, true},
		{"18446744073709551615", 0, 18446744073709551615, true, true},
		{"18446744073709551616", 0, 0, true, false},
		{"1844674407370955161.5", 1, 18446744073709551615, true, true},
		{"18446744073709551615.5", 0, 0, false, false},
		{"1e19", 0, 10_000_000_000_000_000_000, true, true},
		{"1e20", 0, 0, true, false},
		{"1e999999999999", 0, 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, ok := parseDecimal(tt.in)
			if !ok {
				t.Fatalf("parseDecimal(%q) failed", tt.in)
			}
			mag, exact, ok := d.round(tt.shift)
			if ok != tt.wantOK || (ok && (mag != tt.wantMag || exact != tt.wantExact)) {
				t.Errorf("round(%q, %d) = %d, %v, %v, want %d, %v, %v", tt.in, tt.shift, mag, exact, ok, tt.wantMag, tt.wantExact, tt.wantOK)
			}
		})
	}
}
