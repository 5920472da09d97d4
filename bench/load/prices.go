package main

// The list prices every BENCH load line is priced with, in one place: US
// East (N. Virginia), on-demand, without free tiers, in US dollars. Each
// says where it is from and as of when; change them here only.
//
// Sources: the AWS pricing pages of each service (aws.amazon.com/<service>/pricing),
// as of 2025-06 unless noted; the Managed Flink figures are the ones issue 22
// states (2026), which match that page.
const (
	// PricesRegion is the region of every price below.
	PricesRegion = "us-east-1"
	// PricesDate is when the prices below were read.
	PricesDate = "2025-06"

	// Lambda, arm64 (Graviton), first tier (as of 2025-06).
	lambdaPerGBSecond = 0.0000133334
	lambdaPerRequest  = 0.20 / 1e6

	// DynamoDB on demand, after the 2024-11-01 price cut (as of 2025-06).
	dynamoPerWRU           = 0.625 / 1e6 // per write request unit (1 KB; twice in a transaction)
	dynamoPerRRU           = 0.125 / 1e6 // per read request unit (4 KB strongly consistent; half eventually)
	dynamoStoragePerGBMo   = 0.25        // table storage, Standard class
	dynamoPITRPerGBMonth   = 0.20        // continuous backups (the views table has point-in-time recovery)
	dynamoItemOverheadByte = 100         // DynamoDB adds 100 bytes per item (and per index entry) to storage

	// DynamoDB provisioned capacity (as of 2025-06): per capacity unit and
	// hour, whether used or not.
	dynamoPerWCUHour = 0.00065
	dynamoPerRCUHour = 0.00013

	// CloudWatch (as of 2025-06).
	logsIngestPerGB      = 0.50 // Logs, Standard class, PutLogEvents ingestion
	logsStoragePerGBMo   = 0.03 // Logs storage (archived, per GB-month)
	logsEventOverhead    = 26   // bytes CloudWatch Logs adds to each log event's size
	metricPerMonth       = 0.30 // a custom metric (each distinct name and dimension set), first 10,000
	alarmPerMetricMonth  = 0.10 // a standard-resolution alarm, per metric it evaluates
	kinesisPerShardHour  = 0.015
	kinesisPerMillionPUT = 0.014 // per million PUT payload units (25 KB each)

	// Amazon Managed Service for Apache Flink (issue 22's figures, 2026).
	flinkPerKPUHour           = 0.11
	flinkRunningStorageGB     = 50   // running application storage per KPU
	flinkStoragePerGBMonth    = 0.10 // running application storage
	flinkSmallestKPUs         = 1    // the smallest application: one KPU for the job
	flinkOrchestrationKPUs    = 1    // plus one per application for orchestration
	hoursPerMonth             = 730  // AWS's month for hourly prices
	secondsPerMonth           = hoursPerMonth * 3600
	lambdaMBPerVCPU           = 1769 // Lambda gives a function one full vCPU at 1,769 MB, proportionally less below
	lambdaBilledGranularityMs = 1    // Lambda bills duration per millisecond, rounded up
)

// flinkMonthly is the smallest Managed Flink application's month: its KPU
// and the orchestration KPU around the clock, and its running storage.
func flinkMonthly() float64 {
	return float64(flinkSmallestKPUs+flinkOrchestrationKPUs)*flinkPerKPUHour*hoursPerMonth +
		flinkSmallestKPUs*flinkRunningStorageGB*flinkStoragePerGBMonth
}
