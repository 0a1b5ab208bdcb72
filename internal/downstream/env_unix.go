//go:build !windows

package downstream

// inheritedEnv are the variables a command server inherits from pybox.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TZ"}
