module example.com/partner-platform-receiver

go 1.19
