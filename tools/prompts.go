package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pythonExecutorPrompts are mcp-python-executor's prompts, with its names
// and arguments, worded for pybox's sandbox.
var pythonExecutorPrompts = []struct {
	prompt *mcp.Prompt
	text   func(args map[string]string) string
}{
	{&mcp.Prompt{Name: "execute-python", Description: "Execute Python code with best practices and error handling",
		Arguments: []*mcp.PromptArgument{
			{Name: "task", Description: "Description of what the code should do", Required: true},
			{Name: "requirements", Description: "Any specific requirements or constraints"},
		}},
		func(a map[string]string) string {
			return fmt.Sprintf("Task: %s\nRequirements: %s\n\nPlease help me write Python code that:\n"+
				"1. Is efficient and follows PEP 8 style guidelines\n2. Includes proper error handling\n"+
				"3. Has clear comments explaining the logic\n4. Uses appropriate Python features and standard library modules\n"+
				"Run it with execute_python: it runs in a fresh sandbox with no network; install packages first with install_packages.",
				a["task"], a["requirements"])
		}},
	{&mcp.Prompt{Name: "debug-python", Description: "Debug Python code execution issues",
		Arguments: []*mcp.PromptArgument{
			{Name: "code", Description: "Code that produced the error", Required: true},
			{Name: "error", Description: "Error message received", Required: true},
		}},
		func(a map[string]string) string {
			return fmt.Sprintf("Let's debug this Python code:\n\n%s\n\nError:\n%s\n\nLet's analyze:\n"+
				"1. The specific error message and line number\n2. Common causes for this type of error\n"+
				"3. Potential fixes and improvements\n4. Best practices to prevent similar issues", a["code"], a["error"])
		}},
	{&mcp.Prompt{Name: "install-packages", Description: "Guide for safely installing Python packages",
		Arguments: []*mcp.PromptArgument{
			{Name: "packages", Description: "List of packages to install", Required: true},
			{Name: "purpose", Description: "What the packages will be used for"},
		}},
		func(a map[string]string) string {
			return fmt.Sprintf("Installing packages: %s\nPurpose: %s\n\nLet's ensure safe installation:\n"+
				"1. Verify package names and versions\n2. Check for potential conflicts\n3. Consider security implications\n"+
				"4. Install them with install_packages (a cached layer of the sandbox's environment; later runs reuse it)\n"+
				"5. Suggest alternative packages if relevant", a["packages"], a["purpose"])
		}},
}

// addPythonExecutorPrompts registers those prompts on s.
func addPythonExecutorPrompts(s *mcp.Server) {
	for _, p := range pythonExecutorPrompts {
		s.AddPrompt(p.prompt, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			args := map[string]string{}
			if req.Params != nil {
				args = req.Params.Arguments
			}
			for _, a := range p.prompt.Arguments {
				if a.Required && args[a.Name] == "" {
					return nil, fmt.Errorf("prompt %s needs the argument %q", p.prompt.Name, a.Name)
				}
			}
			return &mcp.GetPromptResult{Description: p.prompt.Description,
				Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: p.text(args)}}}}, nil
		})
	}
}
