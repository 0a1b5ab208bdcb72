package policies

import (
	"bytes"
	"encoding/json"
	"errors"
)

// checkAllowlists refuses an allowlist that is present but null or empty
// (in YAML, `mcp_tools:` with nothing after it is null): left as it was,
// it would read as "no allowlist" and allow everything, the opposite of
// what an empty list says. mcp_tools: [] allows no downstream tool (and is
// kept); a null mcp_tools, or an empty or null guard.imports_allow, is
// refused as a mistake, saying what to write instead.
func checkAllowlists(data []byte) error {
	var top struct {
		MCPTools json.RawMessage `json:"mcp_tools"`
		Guard    json.RawMessage `json:"guard"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil // the strict decode names the mistake
	}
	var errs []error
	if isNull(top.MCPTools) {
		errs = append(errs, errors.New("mcp_tools is null (an empty value): list the downstream tools code may call "+
			"(such as [\"filesystem.*\"]), write [] to allow none, or leave mcp_tools out to allow every configured one"))
	}
	var guard struct {
		Allow json.RawMessage `json:"imports_allow"`
	}
	if len(top.Guard) > 0 && json.Unmarshal(top.Guard, &guard) == nil && guard.Allow != nil {
		if isNull(guard.Allow) || isEmptyList(guard.Allow) {
			errs = append(errs, errors.New("guard.imports_allow is empty or null: list the modules programs may import, "+
				"or leave imports_allow out for no import allowlist (an empty list would allow every import)"))
		}
	}
	return errors.Join(errs...)
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func isEmptyList(raw json.RawMessage) bool {
	var l []json.RawMessage
	return json.Unmarshal(raw, &l) == nil && len(l) == 0
}
