// The typed client against the mock (`npm start`) or the reference server: a search, then a service
// request for the first business found. Run:  npx tsx examples/client/search.ts
// (BASE_URL=http://127.0.0.1:4020 for `serve`; CLIENT_ID and CLIENT_SECRET default to the demo client).
import { createPartnerClient } from "@partner-platform/sdk";

const baseUrl = process.env.BASE_URL ?? "http://127.0.0.1:4010";
const client = createPartnerClient({
  baseUrl,
  authUrl: baseUrl, // the mock and `serve` answer the token endpoint on the API's port
  clientId: process.env.CLIENT_ID ?? "partner-acme",
  clientSecret: process.env.CLIENT_SECRET ?? "s3cr3t-acme-2026",
  scopes: ["demand::search", "demand::request"],
});

const search = await client.GET("/api/v2/businesses/search", { params: { query: { category_id: "1000123", zip: "10001" } } });
if (search.error) throw new Error(`search: ${search.error.type}: ${search.error.detail}`);
for (const b of search.data.businesses) console.log(`business ${b.businessID}: ${b.name}`);

const created = await client.POST("/api/v4/requests", {
  body: { categoryID: "1000123", zipCode: "10001", customer: { name: "Jane Doe", email: "jane.doe@example.com", phone: "+12125550143" } },
});
if (created.error) throw new Error(`request: ${created.error.type}: ${created.error.detail}`);
console.log(`request ${created.data.requestID}: ${created.data.status}, leads for ${created.data.leads.map((l) => l.businessID).join(", ")}`);
