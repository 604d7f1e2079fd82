// Command populate writes the map outputs scripts/bench-fetch.sh fetches
// from a daemon: it registers executor 0 of an application (with its
// spark.authenticate secret, if any) on the daemon's socket and commits
// shuffle 0's map outputs of random bytes, uncompressed.
//
//	populate SOCKET APP SECRET MAPS REDUCES BLOCK_BYTES
//
// SECRET "" registers the application without a secret.
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "populate:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 6 {
		return fmt.Errorf("usage: populate SOCKET APP SECRET MAPS REDUCES BLOCK_BYTES")
	}
	sock, app, secret := args[0], args[1], args[2]
	var n [3]int
	for i, name := range []string{"MAPS", "REDUCES", "BLOCK_BYTES"} {
		v, err := strconv.Atoi(args[3+i])
		if err != nil || v < 1 {
			return fmt.Errorf("%s %q: want a positive integer", name, args[3+i])
		}
		n[i] = v
	}
	maps, reduces, blockBytes := n[0], n[1], n[2]
	if int64(reduces)*int64(blockBytes) > 48<<20 {
		return fmt.Errorf("REDUCES x BLOCK_BYTES = %d: at most 48 MiB a map output (one batch)", int64(reduces)*int64(blockBytes))
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	reg, err := c.Register(ctx, protocol.RegisterExecutor{AppID: app, ExecutorID: "0", WithAuth: true, AuthSecret: protocol.Secret(secret)})
	if err != nil {
		return err
	}
	if reg.Serve == nil || reg.Serve.Port == 0 {
		return fmt.Errorf("the daemon does not serve (no --serve-addr)")
	}
	data := make([]byte, reduces*blockBytes)
	offsets := make([]int64, reduces+1)
	for r := range offsets {
		offsets[r] = int64(r * blockBytes)
	}
	for m := range maps {
		rand.Read(data)
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 0, MapID: int64(m), NumPartitions: int32(reduces), Kind: protocol.KindOpaque, Codec: "none", Checksum: "none"})
		if err != nil {
			return err
		}
		if err := mo.WriteOpaque(ctx, data, offsets); err != nil {
			return err
		}
		if _, err := mo.Commit(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("populate: %d map outputs of %d blocks of %d bytes for %s, executor 0, shuffle 0\n", maps, reduces, blockBytes, app)
	return nil
}
