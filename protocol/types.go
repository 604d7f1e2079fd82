package protocol

import "fmt"

// Type is a frame's message type. A request type has the high bit clear;
// its success response is the same number with the high bit set
// (Type.Response). TypeError answers any request.
type Type uint16

// Request types, client to server.
const (
	TypeHello             Type = 0x0001
	TypeRegister          Type = 0x0002
	TypeOpen              Type = 0x0003
	TypeBatch             Type = 0x0004
	TypeCommit            Type = 0x0005
	TypeAbort             Type = 0x0006
	TypePing              Type = 0x0007
	TypeStats             Type = 0x0008
	TypeRemoveShuffle     Type = 0x0009
	TypeRemoveApplication Type = 0x000A
	TypeListShuffles      Type = 0x000B
	TypeListApplications  Type = 0x000C
)

// Response types, server to client.
const (
	TypeServerHello        Type = 0x8001
	TypeRegistered         Type = 0x8002
	TypeOpened             Type = 0x8003
	TypeBatchAccepted      Type = 0x8004
	TypeCommitResult       Type = 0x8005
	TypeAborted            Type = 0x8006
	TypePong               Type = 0x8007
	TypeStatsResult        Type = 0x8008
	TypeShuffleRemoved     Type = 0x8009
	TypeApplicationRemoved Type = 0x800A
	TypeShuffleList        Type = 0x800B
	TypeApplicationList    Type = 0x800C
	TypeError              Type = 0xFFFF
)

const responseBit Type = 0x8000

var typeNames = map[Type]string{
	TypeHello:              "Hello",
	TypeRegister:           "Register",
	TypeOpen:               "Open",
	TypeBatch:              "Batch",
	TypeCommit:             "Commit",
	TypeAbort:              "Abort",
	TypePing:               "Ping",
	TypeStats:              "Stats",
	TypeRemoveShuffle:      "RemoveShuffle",
	TypeRemoveApplication:  "RemoveApplication",
	TypeListShuffles:       "ListShuffles",
	TypeListApplications:   "ListApplications",
	TypeServerHello:        "ServerHello",
	TypeRegistered:         "Registered",
	TypeOpened:             "Opened",
	TypeBatchAccepted:      "BatchAccepted",
	TypeCommitResult:       "CommitResult",
	TypeAborted:            "Aborted",
	TypePong:               "Pong",
	TypeStatsResult:        "StatsResult",
	TypeShuffleRemoved:     "ShuffleRemoved",
	TypeApplicationRemoved: "ApplicationRemoved",
	TypeShuffleList:        "ShuffleList",
	TypeApplicationList:    "ApplicationList",
	TypeError:              "Error",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("Type(%#04x)", uint16(t))
}

// Known reports whether t is a type this package can decode.
func (t Type) Known() bool {
	_, ok := typeNames[t]
	return ok
}

// IsResponse reports whether t flows from server to client.
func (t Type) IsResponse() bool { return t&responseBit != 0 }

// Response returns the success response type of request type t.
func (t Type) Response() Type { return t | responseBit }

// New returns a zero message of type t, ready for Unmarshal.
func New(t Type) (Message, error) {
	switch t {
	case TypeHello:
		return new(Hello), nil
	case TypeRegister:
		return new(RegisterExecutor), nil
	case TypeOpen:
		return new(OpenMapOutput), nil
	case TypeBatch:
		return new(Batch), nil
	case TypeCommit:
		return new(Commit), nil
	case TypeAbort:
		return new(Abort), nil
	case TypePing:
		return new(Ping), nil
	case TypeStats:
		return new(Stats), nil
	case TypeRemoveShuffle:
		return new(RemoveShuffle), nil
	case TypeRemoveApplication:
		return new(RemoveApplication), nil
	case TypeListShuffles:
		return new(ListShuffles), nil
	case TypeListApplications:
		return new(ListApplications), nil
	case TypeServerHello:
		return new(ServerHello), nil
	case TypeRegistered:
		return new(Registered), nil
	case TypeOpened:
		return new(Opened), nil
	case TypeBatchAccepted:
		return new(BatchAccepted), nil
	case TypeCommitResult:
		return new(CommitResult), nil
	case TypeAborted:
		return new(Aborted), nil
	case TypePong:
		return new(Pong), nil
	case TypeStatsResult:
		return new(StatsResult), nil
	case TypeShuffleRemoved:
		return new(ShuffleRemoved), nil
	case TypeApplicationRemoved:
		return new(ApplicationRemoved), nil
	case TypeShuffleList:
		return new(ShuffleList), nil
	case TypeApplicationList:
		return new(ApplicationList), nil
	case TypeError:
		return new(Error), nil
	}
	return nil, fmt.Errorf("%w: message type %v", ErrUnsupported, t)
}

// Decode decodes and validates the payload of a frame of type t. Byte
// fields of the result (Batch.Inline) alias payload.
func Decode(t Type, payload []byte) (Message, error) {
	m, err := New(t)
	if err != nil {
		return nil, err
	}
	if err := m.Unmarshal(payload); err != nil {
		return nil, err
	}
	return m, nil
}

// Marshal validates m and returns its payload bytes (no header).
func Marshal(m Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m.Append(nil), nil
}
