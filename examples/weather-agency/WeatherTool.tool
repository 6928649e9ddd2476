# Tool Name: WeatherTool
This tool calls an external weather API with the following details:
- Base URL: https://api.example-weather.com
- Endpoint: /current
- Required Query Param: location
- Returns JSON with fields: { "temp": number, "conditions": string }

## Implementation
Use 'fetch' to call the external API, parse the JSON, and return:
{
  "temp": <number>,
  "conditions": <string>
}

