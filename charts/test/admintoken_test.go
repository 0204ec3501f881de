package charttest

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

// The chart guards /debug/* by default: it generates a Secret with a
// random 32-character token (a new one per fresh render), mounts it and
// names it in admin.token_file. generate: false renders none; an existing
// Secret is mounted instead of a generated one.
func TestChartAdminToken(t *testing.T) {
	c := loadChart(t)
	tokenRe := regexp.MustCompile(`(?m)^  token: "([A-Za-z0-9+/=]+)"$`)
	tokens := map[string]bool{}
	for i := 0; i < 2; i++ {
		m, _, err := render(c, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"name: dm-dualmap-admin-token", "token_file: /etc/dualmap/admin/token", "secretName: dm-dualmap-admin-token"} {
			if !strings.Contains(m, want) {
				t.Errorf("default render lacks %q", want)
			}
		}
		got := tokenRe.FindAllStringSubmatch(m, -1)
		if len(got) != 1 {
			t.Fatalf("default render: %d generated tokens, want 1", len(got))
		}
		raw, err := base64.StdEncoding.DecodeString(got[0][1])
		if err != nil || len(raw) != 32 {
			t.Fatalf("generated token %q: %d bytes (%v), want 32", got[0][1], len(raw), err)
		}
		tokens[string(raw)] = true
	}
	if len(tokens) != 2 {
		t.Errorf("two fresh renders drew the same token")
	}
	m, _, err := render(c, map[string]any{"adminToken": map[string]any{"generate": false}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m, "admin-token") || strings.Contains(m, "token_file") {
		t.Errorf("generate: false still renders an admin token")
	}
	m, _, err = render(c, map[string]any{"adminToken": map[string]any{"existingSecret": "mine", "existingSecretKey": "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m, "dm-dualmap-admin-token") || !strings.Contains(m, "secretName: mine") || !strings.Contains(m, "- key: k") {
		t.Errorf("an existing Secret: the generated one rendered, or yours not mounted")
	}
}
