// Package sparkauth is the server side of Spark's transport authentication,
// for a block server that stock Spark reducers (3.5 through 4.3) fetch from
// with spark.authenticate=true: SASL DIGEST-MD5 as Spark's SparkSaslServer
// runs it (with the DIGEST-MD5 security layer and Spark's SaslEncryption
// framing when the client asks for spark.authenticate.enableSaslEncryption),
// and Spark's AuthEngine (spark.network.crypto.enabled=true: an X25519 key
// exchange whose messages are sealed with a key derived from the shared
// secret, then AES/CTR or AES/GCM on the connection).
//
// A connection's handshake runs through one Server:
//
//	srv := sparkauth.NewServer(secrets, sparkauth.Options{})
//	for !srv.Done() {
//		// body: the payload of the next RpcRequest frame the client sent
//		reply, err := srv.Step(body)
//		if err != nil {
//			// answer RpcFailure with a generic message, then close
//		}
//		// answer RpcResponse with reply, unencrypted
//	}
//	if c := srv.Cipher(); c != nil {
//		r, w = c.WrapReader(conn), c.WrapWriter(conn)
//		// per frame: w.BeginFrame(n), then its n bytes in any Writes
//	}
//	// every request must name srv.AppID()
//
// Step tells the two protocols apart by the first byte of the first message:
// 0xEA is a SaslMessage, 0xFB an AuthMessage. The byte layouts, what each
// Spark version does, and how the server finds the settings Spark does not
// negotiate (authEngineVersion, the AuthEngine cipher) are described in
// docs/serving-auth.md.
//
// Invariants: a Server never returns a secret or a value derived from one in
// an error or a String; it does not keep or modify the slice a SecretFunc
// returns; the keys it derives are zeroed when no longer needed (the session
// keys live as long as the Cipher). After a failed Step the Server stays
// failed: every later Step fails, and the connection must be closed.
package sparkauth
