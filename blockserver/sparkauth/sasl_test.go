package sparkauth

import "testing"

// RFC 2831 section 4's two examples (IMAP and ACAP): user chris, password
// secret, realm elwood.innosoft.com, qop auth.
func TestDigestRFC2831Examples(t *testing.T) {
	for _, tc := range []struct {
		nonce, cnonce, uri, response, rspauth string
	}{
		{"OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk", "imap/elwood.innosoft.com", "d388dad90d4bbd760a152321f2143af7", "ea40f60335c427b5527b84dbabcdfffd"},
		{"OA9BSXrbuRhWay", "OA9BSuZWMSpW8m", "acap/elwood.innosoft.com", "6084c6db3fede7352c551284490fd0fc", "2f0b3d7c3c2e486600ef710726aa2eae"},
	} {
		ha1 := saslHA1("chris", "elwood.innosoft.com", []byte("secret"), tc.nonce, tc.cnonce, nil)
		if got := string(saslResponseValue(ha1, "AUTHENTICATE", tc.uri, "auth", tc.nonce, "00000001", tc.cnonce)); got != tc.response {
			t.Errorf("%s: response = %s, want %s", tc.uri, got, tc.response)
		}
		if got := string(saslResponseValue(ha1, "", tc.uri, "auth", tc.nonce, "00000001", tc.cnonce)); got != tc.rspauth {
			t.Errorf("%s: rspauth = %s, want %s", tc.uri, got, tc.rspauth)
		}
	}
}
