module roomkit/agent

go 1.19
