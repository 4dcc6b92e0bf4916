package fakemodel

// The OpenAI APIs (Responses for Codex, Chat Completions for OpenCode and the
// openai engine) come in the next commit.

func parseResponses(req *Request, m map[string]any) {}
func parseChat(req *Request, m map[string]any)      {}

func responsesEvents(req Request, chunks []string) []event { return nil }
func chatEvents(req Request, chunks []string) []event      { return nil }
func responsesObject(req Request, status string) any       { return nil }
func chatObject(req Request) any                           { return nil }
