// Package sparkjars finds the jars of the Spark versions the interop tests
// run Spark's own classes from: the directories in SHUFFLED_SPARK_JARS
// (separated by the OS's list separator), else
// bin/spark/pyspark-*/pyspark/jars under the repository root, where
// scripts/test installs pyspark.
package sparkjars

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Env names the variable that lists the jar directories.
const Env = "SHUFFLED_SPARK_JARS"

// Find returns the jar directories to test against, by Spark version: the
// version is read from the name of the artifact's jar in each directory
// (artifact "spark-network-common" finds spark-network-common_2.13-4.0.1.jar
// and version 4.0.1). A directory that holds no such jar is left out. It
// skips the test where no directory holds one, and fails it where a
// directory of Env cannot be read.
func Find(t testing.TB, artifact string) map[string]string {
	t.Helper()
	var dirs []string
	if env := os.Getenv(Env); env != "" {
		dirs = filepath.SplitList(env)
	} else {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dirs, _ = filepath.Glob(filepath.Join(root, "bin", "spark", "pyspark-*", "pyspark", "jars"))
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(artifact) + `_[0-9.]+-([0-9][0-9A-Za-z.\-]*)\.jar$`)
	out := make(map[string]string)
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatalf("%s: %v", Env, err)
		}
		for _, e := range ents {
			if m := re.FindStringSubmatch(e.Name()); m != nil {
				out[m[1]] = d
			}
		}
	}
	if len(out) == 0 {
		t.Skip("no Spark jars: set " + Env + " or install pyspark under bin/spark (scripts/test does)")
	}
	return out
}

// repoRoot returns the nearest directory above the working directory (a
// test's package) that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
}
