package command

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/inspect"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

const catUsage = `usage: shuffled cat [flags] FILE
       shuffled cat [flags] --dir DIR --shuffle S --map M
       shuffled cat [flags] --local-dirs A,B [--sub-dirs 64] --shuffle S --map M

Reads a committed map output back from disk: per partition its bytes,
decompressed bytes, rows and checksum (stored and recomputed), then a
summary. FILE is its .data, .index or .checksum.ALG file; --dir names a
flat layout, --local-dirs Spark's hashed one. Exits 1 when a partition
fails its checksum or does not decode.

With --rows, the rows go to stdout and the table (or --json summary) to
stderr. kudo tables carry no types: their rows need --schema, the
columns the map output was opened with, in Spark DDL ("id int, price
decimal(38,10), s string"); without it cat reads and counts the tables'
headers.

flags:
`

// cat prints what a committed map output holds.
func cat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shuffled cat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, catUsage)
		fs.PrintDefaults()
	}
	var (
		dir       = fs.String("dir", "", "directory of a flat layout")
		localDirs = fs.String("local-dirs", "", "comma-separated Spark local dirs of a hashed layout")
		subDirs   = fs.Int("sub-dirs", shufflefile.DefaultSubDirs, "sub-directories per local dir (spark.diskStore.subDirectories)")
		shuffle   = fs.Int64("shuffle", -1, "shuffle id")
		mapID     = fs.Int64("map", -1, "map id")
		codecName = fs.String("codec", "auto", "codec of the partitions: auto, none, lz4, zstd or snappy")
		algName   = fs.String("checksum", "auto", "checksum file to verify: auto, none, ADLER32, CRC32 or CRC32C")
		payload   = fs.String("payload", "auto", "payload of the partitions: auto, columnar, opaque or kudo")
		schema    = fs.String("schema", "", "kudo: the map output's columns in Spark DDL, e.g. \"id int, s string\"")
		rows      = fs.String("rows", "", "print rows: csv or json")
		part      = fs.Int("partition", -1, "inspect this partition only")
		preview   = fs.Int("preview", inspect.DefaultPreviewBytes, "bytes of each opaque partition a row shows")
		asJSON    = fs.Bool("json", false, "print the summary as JSON")
	)
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var src inspect.Source
	switch {
	case len(paths) > 1:
		return fmt.Errorf("%w: cat takes one file, got %d: %q", errUsage, len(paths), paths)
	case len(paths) == 1:
		for _, name := range []string{"dir", "local-dirs", "sub-dirs", "shuffle", "map"} {
			if set[name] {
				return fmt.Errorf("%w: --%s names the map output, and so does the file %q: give one or the other", errUsage, name, paths[0])
			}
		}
		if src, err = inspect.SourceFromPath(vfs.Default, paths[0]); err != nil {
			if errors.Is(err, inspect.ErrInvalid) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return err
		}
	default:
		if (*dir == "") == (*localDirs == "") {
			return fmt.Errorf("%w: give a file, --dir or --local-dirs (one of them)", errUsage)
		}
		if *shuffle < 0 || *shuffle > 1<<31-1 || !set["shuffle"] {
			return fmt.Errorf("%w: --shuffle %d: want a shuffle id in [0,2^31)", errUsage, *shuffle)
		}
		if *mapID < 0 || !set["map"] {
			return fmt.Errorf("%w: --map %d: want a non-negative map id", errUsage, *mapID)
		}
		src.ID = shufflefile.ID{Shuffle: int32(*shuffle), Map: *mapID}
		if *dir != "" {
			if set["sub-dirs"] {
				return fmt.Errorf("%w: --sub-dirs goes with --local-dirs, not --dir", errUsage)
			}
			src.Layout = shufflefile.Flat(*dir)
		} else {
			h := shufflefile.SparkHashed{LocalDirs: strings.Split(*localDirs, ","), SubDirs: *subDirs}
			if err := h.Validate(); err != nil {
				return fmt.Errorf("%w: --local-dirs %q --sub-dirs %d: %v", errUsage, *localDirs, *subDirs, err)
			}
			src.Layout = h
		}
	}

	opts, err := catOptions(*codecName, *algName, *payload, *part, *preview, set)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if set["schema"] {
		fields, err := partition.ParseSchema(*schema)
		if err != nil {
			return fmt.Errorf("%w: --schema: %w", errUsage, err)
		}
		opts = append(opts, inspect.WithSchema(fields))
	}
	format, err := inspect.ParseRowFormat(*rows)
	if err != nil {
		return fmt.Errorf("%w: --rows: %v", errUsage, err)
	}
	report := stdout
	if format != inspect.NoRows {
		opts = append(opts, inspect.WithRows(format, stdout))
		report = stderr
	}

	s, err := inspect.Inspect(ctx, src, opts...)
	if err != nil {
		if errors.Is(err, inspect.ErrInvalid) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	if *asJSON {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(report, "%s\n", b); err != nil {
			return err
		}
	} else if err := s.WriteText(report); err != nil {
		return err
	}
	return s.Err()
}

// catOptions turns cat's flags into inspect options.
func catOptions(codecName, algName, payload string, part, preview int, set map[string]bool) ([]inspect.Option, error) {
	var opts []inspect.Option
	if !strings.EqualFold(codecName, "auto") {
		k, err := codec.Parse(codecName)
		if err != nil {
			return nil, fmt.Errorf("--codec: %v", err)
		}
		opts = append(opts, inspect.WithCodec(k))
	}
	if !strings.EqualFold(algName, "auto") {
		alg, err := checksum.Parse(algName)
		if err != nil {
			return nil, fmt.Errorf("--checksum: %v", err)
		}
		opts = append(opts, inspect.WithChecksum(alg))
	}
	p, err := inspect.ParsePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("--payload: %v", err)
	}
	opts = append(opts, inspect.WithPayload(p))
	if set["partition"] {
		if part < 0 {
			return nil, fmt.Errorf("--partition %d: want a partition number >= 0", part)
		}
		opts = append(opts, inspect.WithPartition(part))
	}
	return append(opts, inspect.WithPreviewBytes(preview)), nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, which it returns ("--" ends the flags).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
