package command

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/server"
)

// adminTimeout bounds one admin command's dial and request.
const adminTimeout = 30 * time.Second

// adminFlags are the flags every admin command takes.
type adminFlags struct {
	fs     *flag.FlagSet
	socket *string
	json   *bool
}

func newAdminFlags(name, args string, stderr io.Writer, withJSON bool) *adminFlags {
	fs := flag.NewFlagSet("shuffled "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var def server.Config
	def.EnsureDefaults()
	socket := def.SocketPath
	if v, ok := os.LookupEnv("SHUFFLED_SOCKET"); ok && v != "" {
		socket = v
	}
	f := &adminFlags{fs: fs, socket: fs.String("socket", socket, "the daemon's Unix socket `path` (env SHUFFLED_SOCKET)")}
	if withJSON {
		f.json = fs.Bool("json", false, "print JSON")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: shuffled %s [flags]%s\n", name, args)
		fs.PrintDefaults()
	}
	return f
}

// parse parses args, allowing flags before and after the operands.
func (f *adminFlags) parse(args []string) ([]string, error) {
	var operands []string
	for {
		if err := f.fs.Parse(args); err != nil {
			return nil, err
		}
		args = f.fs.Args()
		if len(args) == 0 {
			return operands, nil
		}
		operands = append(operands, args[0])
		args = args[1:]
	}
}

// connect parses args, which must hold no operand, and connects to the
// daemon; the caller closes the client and calls cancel.
func (f *adminFlags) connect(ctx context.Context, args []string) (_ *client.Client, _ context.Context, cancel context.CancelFunc, err error) {
	operands, err := f.parse(args)
	if err != nil {
		return nil, nil, nil, usageErr(err)
	}
	if len(operands) > 0 {
		return nil, nil, nil, fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, f.fs.Name(), operands)
	}
	return f.dial(ctx)
}

// dial connects to the daemon, bounded by adminTimeout.
func (f *adminFlags) dial(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	c, err := client.Dial(ctx, *f.socket, client.WithName("shuffled admin"))
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("daemon at --socket %s: %w", *f.socket, err)
	}
	return c, ctx, cancel, nil
}

// usageErr turns a flag error into a usage error (exit 2); -h, after the
// usage is printed, is errHelped (exit 0).
func usageErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelped
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// humanBytes writes n bytes with a binary unit, one decimal past KiB, and
// the exact count: "71 B", "1.5 MiB (1572864 bytes)".
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB", "PiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", f, unit, n)
}

// apps lists the applications on the daemon.
func apps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAdminFlags("apps", "", stderr, true)
	c, ctx, cancel, err := f.connect(ctx, args)
	if err != nil {
		return err
	}
	defer cancel()
	defer c.Close()
	list, err := c.ListApplications(ctx)
	if err != nil {
		return fmt.Errorf("listing applications: %w", err)
	}
	if *f.json {
		out := appsJSON{Applications: []appJSON{}}
		for _, a := range list {
			out.Applications = append(out.Applications, appJSON(a))
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APPLICATION\tOWNER\tCONNECTIONS\tSHUFFLES\tMAP OUTPUTS\tBYTES")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", a.AppID, ownerName(a.OwnerUID), a.Connections, a.Shuffles, a.MapOutputs, humanBytes(a.Bytes))
	}
	return tw.Flush()
}

// appsJSON is what `apps --json` prints (docs/operations.md).
type appsJSON struct {
	Applications []appJSON `json:"applications"`
}

type appJSON struct {
	AppID       string `json:"app_id"`
	OwnerUID    int64  `json:"owner_uid"`
	Connections int32  `json:"connections"`
	Shuffles    int32  `json:"shuffles"`
	MapOutputs  int64  `json:"map_outputs"`
	Bytes       int64  `json:"bytes"`
}

// ownerName is "name (uid)", the uid alone when it has no name, or "-"
// for no recorded owner.
func ownerName(uid int64) string {
	if uid < 0 {
		return "-"
	}
	id := strconv.FormatInt(uid, 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (" + id + ")"
	}
	return id
}

// rm removes an application, or one shuffle of it.
func rm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAdminFlags("rm", " APP [SHUFFLE]", stderr, false)
	operands, err := f.parse(args)
	if err != nil {
		return usageErr(err)
	}
	if len(operands) < 1 || len(operands) > 2 {
		f.fs.Usage()
		return fmt.Errorf("%w: rm takes APP [SHUFFLE], got %q", errUsage, operands)
	}
	app := operands[0]
	if err := protocol.ValidateName("APP", app); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	shuffle := int64(-1)
	if len(operands) == 2 {
		shuffle, err = strconv.ParseInt(operands[1], 10, 32)
		if err != nil || shuffle < 0 {
			return fmt.Errorf("%w: SHUFFLE %q: want a shuffle id, 0 to %d", errUsage, operands[1], int32(1<<31-1))
		}
	}
	c, ctx, cancel, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	defer c.Close()
	var removed protocol.Removed
	what := "application " + app
	if shuffle >= 0 {
		what = fmt.Sprintf("shuffle %d of application %s", shuffle, app)
		removed, err = c.RemoveShuffle(ctx, app, int32(shuffle))
	} else {
		removed, err = c.RemoveApplication(ctx, app)
	}
	if err != nil {
		if protocol.CodeOf(err) == protocol.CodePermissionDenied {
			return fmt.Errorf("removing %s: %w (only the user that registered an application may remove it: run shuffled rm as that user, e.g. with sudo -u)", what, err)
		}
		return fmt.Errorf("removing %s: %w", what, err)
	}
	if removed.MapOutputs == 0 && removed.Bytes == 0 {
		return fmt.Errorf("%w: %s: no map outputs found, nothing removed (is the name right? shuffled apps lists them)", errNothing, what)
	}
	outputs := "map outputs"
	if removed.MapOutputs == 1 {
		outputs = "map output"
	}
	_, err = fmt.Fprintf(stdout, "removed %s: %d %s, %s\n", what, removed.MapOutputs, outputs, humanBytes(removed.Bytes))
	return err
}

// stats prints the daemon's figures (StatsResult).
func stats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAdminFlags("stats", "", stderr, true)
	c, ctx, cancel, err := f.connect(ctx, args)
	if err != nil {
		return err
	}
	defer cancel()
	defer c.Close()
	list, err := c.Stats(ctx)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	hello := c.ServerHello()
	if *f.json {
		figures := make(map[string]int64, len(list))
		for _, s := range list {
			figures[s.Name] = s.Value
		}
		return json.NewEncoder(stdout).Encode(struct {
			Server string           `json:"server"`
			Stats  map[string]int64 `json:"stats"`
		}{hello.Server, figures})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "server\t%s\n", hello.Server)
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%d\n", s.Name, s.Value)
	}
	return tw.Flush()
}
