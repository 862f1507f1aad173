package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The receiver's check, as docs/integrating.md shows it to a shop (standard library only): the
// test below holds the document's copy to this one, and this one to Sign.

// BEGIN receiver
// verify reports whether header (the Seckill-Signature value) signs body with secret, made
// within five minutes of now.
func verify(secret, header string, body []byte, now time.Time) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// END receiver

func TestTheIntegratingDocsReceiver(t *testing.T) {
	src, err := os.ReadFile("receiver_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// BEGIN receiver\n")
	code, _, _ = strings.Cut(code, "\n// END receiver")
	doc, err := os.ReadFile("../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), code) {
		t.Errorf("docs/integrating.md does not show the receiver's check as internal/signature/receiver_test.go has it:\n%s", code)
	}
	now := time.Now()
	body := []byte(`{"id":"g1.paid","type":"order.paid"}`)
	sig := Sign(secret, now, body)
	if !verify(string(secret), sig, body, now) {
		t.Error("the receiver refuses a good signature")
	}
	for name, ok := range map[string]bool{
		"tampered": verify(string(secret), sig, []byte(`{"id":"g1.refunded"}`), now),
		"old":      verify(string(secret), sig, body, now.Add(6*time.Minute)),
		"forged":   verify("another secret of some length", sig, body, now),
		"empty":    verify(string(secret), "", body, now),
	} {
		if ok {
			t.Errorf("the receiver takes a %s body", name)
		}
	}
}
