package protocol

import "fmt"

// MaxApplications bounds ApplicationList.Applications: at most about
// 19 MiB of entries, within the default max_frame.
const MaxApplications = 1 << 16

// ListApplications asks for the applications the peer may see, for the
// admin commands (`shuffled apps`). Empty.
type ListApplications struct{}

func (*ListApplications) Type() Type               { return TypeListApplications }
func (*ListApplications) Validate() error          { return nil }
func (*ListApplications) Append(dst []byte) []byte { return dst }
func (*ListApplications) Unmarshal(p []byte) error {
	return unmarshalEmpty("ListApplications", p)
}

// ApplicationInfo is one application of ApplicationList.
//
//	string app_id | i64 owner_uid (-1: no recorded owner) | i32 connections |
//	i32 shuffles | i64 map_outputs | i64 bytes
type ApplicationInfo struct {
	AppID       string
	OwnerUID    int64 // the uid that registered it, or -1 when none is recorded
	Connections int32 // connections registered for it now
	Shuffles    int32 // shuffles with files, in the root and its Spark local dirs
	MapOutputs  int64 // committed map outputs (index files)
	Bytes       int64 // bytes of all its files
}

// ApplicationList answers ListApplications, ascending by id.
//
//	u32 count | count × application_info
type ApplicationList struct {
	Applications []ApplicationInfo
}

func (*ApplicationList) Type() Type { return TypeApplicationList }

func (m *ApplicationList) Validate() error {
	if len(m.Applications) > MaxApplications {
		return invalid("ApplicationList", "Applications", "%d applications exceed %d", len(m.Applications), MaxApplications)
	}
	for i, a := range m.Applications {
		field := func(f string) string { return fmt.Sprintf("Applications[%d].%s", i, f) }
		if err := ValidateName("ApplicationList."+field("AppID"), a.AppID); err != nil {
			return err
		}
		switch {
		case i > 0 && a.AppID <= m.Applications[i-1].AppID:
			return invalid("ApplicationList", field("AppID"), "%q not after %q", a.AppID, m.Applications[i-1].AppID)
		case a.OwnerUID < -1 || a.OwnerUID > 1<<32-1:
			return invalid("ApplicationList", field("OwnerUID"), "%d is neither -1 nor a uid", a.OwnerUID)
		case a.Connections < 0:
			return invalid("ApplicationList", field("Connections"), "%d is negative", a.Connections)
		case a.Shuffles < 0:
			return invalid("ApplicationList", field("Shuffles"), "%d is negative", a.Shuffles)
		case a.MapOutputs < 0:
			return invalid("ApplicationList", field("MapOutputs"), "%d is negative", a.MapOutputs)
		case a.Bytes < 0:
			return invalid("ApplicationList", field("Bytes"), "%d is negative", a.Bytes)
		}
	}
	return nil
}

func (m *ApplicationList) Append(dst []byte) []byte {
	dst = appendU32(dst, uint32(len(m.Applications)))
	for _, a := range m.Applications {
		dst = appendString(dst, a.AppID)
		dst = appendI64(dst, a.OwnerUID)
		dst = appendI32(dst, a.Connections)
		dst = appendI32(dst, a.Shuffles)
		dst = appendI64(dst, a.MapOutputs)
		dst = appendI64(dst, a.Bytes)
	}
	return dst
}

func (m *ApplicationList) Unmarshal(p []byte) error {
	d := decoder{msg: "ApplicationList", p: p}
	*m = ApplicationList{}
	// An entry takes at least 2+1 (a one-byte id) + 8+4+4+8+8 bytes.
	if n := d.count("Applications", MaxApplications, 35); n > 0 {
		m.Applications = make([]ApplicationInfo, n)
		for i := range m.Applications {
			m.Applications[i] = ApplicationInfo{
				AppID:       d.str("AppID", MaxNameLen),
				OwnerUID:    d.i64("OwnerUID"),
				Connections: d.i32("Connections"),
				Shuffles:    d.i32("Shuffles"),
				MapOutputs:  d.i64("MapOutputs"),
				Bytes:       d.i64("Bytes"),
			}
		}
	}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

var (
	_ Message = (*ListApplications)(nil)
	_ Message = (*ApplicationList)(nil)
)
