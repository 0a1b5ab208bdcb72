package tools

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool sets choose which tools a server lists, so users of other popular
// executors keep their prompts and configurations: each set has exactly
// the tool names and argument names of that server.
const (
	ToolsetDefault          = "default"           // pybox's own tools
	ToolsetMCPCodeExecutor  = "mcp-code-executor" // mcp_code_executor
	ToolsetMCPExecutor      = "mcp-executor"      // mcp-executor: stateful execute_python
	ToolsetPythonExecutor   = "python-executor"   // mcp-python-executor: execute_python with inputData
	ToolsetAll              = "all"               // pybox's tools plus every compatible name
	executePythonStatefulID = "execute_python/stateful"
	executePythonID         = "execute_python/input-data"
)

var toolsets = map[string][]string{
	ToolsetDefault: {"execute_code", "execute_code_file", "initialize_code_file", "append_to_code_file", "read_code_file",
		"install_dependencies", "check_installed_packages", "configure_environment", "get_environment_config",
		"list_sessions", "close_session", "read_file", "write_file", "list_files"},
	ToolsetMCPCodeExecutor: {"execute_code", "install_dependencies", "check_installed_packages", "configure_environment",
		"get_environment_config", "initialize_code_file", "append_to_code_file", "execute_code_file", "read_code_file"},
	ToolsetMCPExecutor:    {executePythonStatefulID, "install_package", "read_file", "write_file", "list_files"},
	ToolsetPythonExecutor: {executePythonID, "install_packages", "health_check"},
	// all: every pybox tool plus the other servers' names; execute_python is
	// mcp-python-executor's (fresh container, inputData).
	ToolsetAll: {"execute_code", "execute_code_file", "initialize_code_file", "append_to_code_file", "read_code_file",
		"install_dependencies", "check_installed_packages", "configure_environment", "get_environment_config",
		"list_sessions", "close_session", "read_file", "write_file", "list_files",
		executePythonID, "install_package", "install_packages", "health_check"},
}

// Toolsets lists the valid tool set names.
func Toolsets() []string {
	return []string{ToolsetDefault, ToolsetMCPCodeExecutor, ToolsetMCPExecutor, ToolsetPythonExecutor, ToolsetAll}
}

// registrars adds each tool to a server, by tool id.
func (h *handlers) registrars() map[string]func(*mcp.Server) {
	return map[string]func(*mcp.Server){
		"execute_code":             func(s *mcp.Server) { addTool(s, executeCodeTool, h.executeCode) },
		"execute_code_file":        func(s *mcp.Server) { addTool(s, executeCodeFileTool, h.executeCodeFile) },
		"initialize_code_file":     func(s *mcp.Server) { addTool(s, initializeCodeFileTool, h.initializeCodeFile) },
		"append_to_code_file":      func(s *mcp.Server) { addTool(s, appendToCodeFileTool, h.appendToCodeFile) },
		"read_code_file":           func(s *mcp.Server) { addTool(s, readCodeFileTool, h.readCodeFile) },
		"install_dependencies":     func(s *mcp.Server) { addTool(s, installDependenciesTool, h.installDependencies) },
		"check_installed_packages": func(s *mcp.Server) { addTool(s, checkInstalledPackagesTool, h.checkInstalledPackages) },
		"configure_environment":    func(s *mcp.Server) { addTool(s, configureEnvironmentTool, h.configureEnvironment) },
		"get_environment_config":   func(s *mcp.Server) { addTool(s, getEnvironmentConfigTool, h.getEnvironmentConfig) },
		"list_sessions":            func(s *mcp.Server) { addTool(s, listSessionsTool, h.listSessions) },
		"close_session":            func(s *mcp.Server) { addTool(s, closeSessionTool, h.closeSession) },
		"read_file":                func(s *mcp.Server) { addTool(s, readFileTool, h.readFile) },
		"write_file":               func(s *mcp.Server) { addTool(s, writeFileTool, h.writeFile) },
		"list_files":               func(s *mcp.Server) { addTool(s, listFilesTool, h.listFiles) },
		"install_package":          func(s *mcp.Server) { addTool(s, installPackageTool, h.installPackage) },
		"install_packages":         func(s *mcp.Server) { addToolWith(s, installPackagesTool, h.installPackages, packagesSchema) },
		executePythonStatefulID:    func(s *mcp.Server) { addTool(s, executePythonStatefulTool, h.executePythonStateful) },
		executePythonID:            func(s *mcp.Server) { addTool(s, executePythonTool, h.executePython) },
		"health_check":             func(s *mcp.Server) { addTool(s, healthCheckTool, h.healthCheck) },
	}
}

// register adds the tools of the named set to s.
func (h *handlers) register(s *mcp.Server, set string) error {
	ids, ok := toolsets[set]
	if !ok {
		return fmt.Errorf("unknown tool set %q: use one of %s", set, strings.Join(Toolsets(), ", "))
	}
	reg := h.registrars()
	for _, id := range ids {
		reg[id](s)
	}
	if set == ToolsetPythonExecutor || set == ToolsetAll {
		addPythonExecutorPrompts(s) // that server's prompts come with its tools
	}
	return nil
}

// ToolNames lists the tool names a set exposes.
func ToolNames(set string) []string {
	var names []string
	for _, id := range toolsets[set] {
		names = append(names, strings.SplitN(id, "/", 2)[0])
	}
	return names
}
